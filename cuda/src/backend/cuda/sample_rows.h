// The kernels' view of the generic per-row sampling structs (cuda/src/sample_rows.h), under the names the CUDA
// backend uses. Included by the .cuh files (nvcc) and cuda_ops.h.
#pragma once

#include "../../sample_rows.h"

namespace vt::cuda {
using vt::PenaltyRow;
using vt::SampleRow;
}  // namespace vt::cuda
