// The CUDA backend's part of the system report (vt_system_info_get): kernels, driver, GPUs, cuBLASLt, device 'auto'.
#pragma once

#include "vt_engine.h"

namespace vt {

// Fills out's CUDA fields (the CPU's are the caller's). Throws only on host allocation failure.
void fill_cuda_system_info(vt_system_info &out);

}  // namespace vt
