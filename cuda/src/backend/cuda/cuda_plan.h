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

// GPU 0 as the memory plan needs it: multiprocessors, memory, whether its KV pool can grow in chunks and by what
// granularity (none of which needs a context), and with_free, the bytes free now: cuMemGetInfo under GPU 0's primary
// context, retained for the question (made then, and destroyed after, unless something holds it: an engine, or a
// CudaDeviceHold). Throws like the driver when CUDA is not usable.
GpuFacts cuda_gpu_facts(bool with_free);

// Holds GPU 0's primary context while it lives (cuDevicePrimaryCtxRetain), so that a load's plan reads the free
// memory under the context its decoder will use, made once for both.
class CudaDeviceHold {
 public:
  CudaDeviceHold();
  ~CudaDeviceHold();
  CudaDeviceHold(const CudaDeviceHold &) = delete;
  CudaDeviceHold &operator=(const CudaDeviceHold &) = delete;

 private:
  int device_ = 0;
};

// Blocks per chunk of a growing KV pool (cuda::kv_chunk_blocks): the fewest blocks whose bytes in one plane are a
// whole number of granules.
int32_t kv_chunk_blocks(int64_t plane_block_bytes, int64_t granularity);

// How a growing region lays out n_slots state slots of slot_bytes each (cuda::slot_layout): the stride, padded, and
// the slots a chunk maps.
struct StateSlotLayout {
  int64_t stride = 0;
  int32_t chunk = 0;
};
StateSlotLayout state_slot_layout(int64_t slot_bytes, int32_t n_slots, int64_t granularity);

// The device workspaces and page-locked host bytes an engine with this plan allocates
// (CudaDecoder::plan_workspace, on a GPU of sm_count multiprocessors; cuBLASLt's workspace whenever it may load).
struct CudaSizes {
  int64_t workspace_bytes = 0, pinned_bytes = 0;
};
CudaSizes cuda_sizes(const ModelConfig &c, const MemoryPlan &m, const vt_engine_params &p, int sm_count);

// The CUDA decoder's params for a plan (load and estimate build them here, so they size the same buffers).
CudaDecoderParams cuda_decoder_params(const MemoryPlan &m, const vt_engine_params &p);

}  // namespace vt
