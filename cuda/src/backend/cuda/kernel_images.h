// The compiled kernels embedded in this binary: one fatbin per op family (cubins for every supported GPU plus
// PTX), written by scripts/build-cuda.mjs into kernels_fatbin.inc. A build without nvcc has none.
#pragma once

#include <cstddef>

namespace vt::cuda {

struct KernelImage {
  const char *name;           // op family, e.g. "gemv" (from gemv.cu)
  const unsigned char *data;  // fatbin bytes, 64-byte aligned
  size_t size;
};

extern const KernelImage kernel_images[];
extern const size_t kernel_image_count;

}  // namespace vt::cuda
