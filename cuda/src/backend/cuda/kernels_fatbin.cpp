// Defines the embedded kernel images. The bytes come from kernels_fatbin.inc, generated (and git-ignored) by
// scripts/build-cuda.mjs; a checkout or build machine without it compiles to an empty table, so the addon
// always links and cuda_available() reports "this build has no CUDA kernels".
#include "backend/cuda/kernel_images.h"

#if __has_include("kernels_fatbin.inc")
#include "kernels_fatbin.inc"
#else
namespace vt::cuda {
const KernelImage kernel_images[1] = {{nullptr, nullptr, 0}};
const size_t kernel_image_count = 0;
}  // namespace vt::cuda
#endif
