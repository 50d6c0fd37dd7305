// What the generic engine asks of the CUDA backend when it plans an engine (memory_plan.cpp) and builds one
// (engine.cpp): whether CUDA can run here, what an engine's device buffers and page-locked staging come to, the
// GPU's memory, and the CUDA decoder's params for a plan. Every cuda:: name the planning needs stays behind these.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_decoder.h"
#include "loader/config.h"
#include "memory_plan.h"
#include "vt_engine.h"

namespace vt {

// Whether CUDA is usable here (driver, GPU, kernels for it: the check device 'auto' makes); why not in *why.
bool cuda_usable(std::string *why);

// GPU 0's total memory in bytes (throws like the driver when CUDA is not usable).
int64_t cuda_total_bytes();

// The device workspaces and page-locked host bytes an engine with this plan allocates
// (CudaDecoder::plan_workspace, on GPU 0's multiprocessor count; cuBLASLt's workspace whenever it may load).
struct CudaSizes {
  int64_t workspace_bytes = 0, pinned_bytes = 0;
};
CudaSizes cuda_sizes(const ModelConfig &c, const MemoryPlan &m, const vt_engine_params &p);

// The CUDA decoder's params for a plan (load and estimate build them here, so they size the same buffers).
CudaDecoderParams cuda_decoder_params(const MemoryPlan &m, const vt_engine_params &p);

}  // namespace vt
