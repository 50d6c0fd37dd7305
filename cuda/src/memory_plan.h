// How much memory an engine will take, from its config and load params alone — the one place that sizes the
// KV pool and the workspaces, so Engine::load and vt_engine_estimate can never disagree.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/config.h"
#include "models/state_layout.h"
#include "vt_engine.h"
#include "tuning.h"

namespace vt {

struct MemoryPlan {
  bool cuda = false;            // the CUDA backend will run it (device 'cuda', or 'auto' with a usable GPU)
  int32_t max_context = 0;
  int32_t block_size = 0;
  int32_t max_seqs = 0;
  int32_t max_batch_tokens = 0;
  int32_t n_blocks = 0;
  int32_t n_threads = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_cache_bytes = 0;   // the whole pool (fp32 on the CPU, the activation type on the GPU), resident
                                // once every block has been used
  StateLayout state;            // what the model's layers keep per sequence (the registry's state_layout)
  int32_t n_state_slots = 0;    // max_seqs when some layer keeps a state slot, else 0
  int64_t state_slot_bytes = 0; // the slots in all (fp32 on every backend)
  int64_t workspace_bytes = 0;  // CPU: activations for max_batch_tokens rows, logits, sampler scratch (host);
                                // CUDA: CudaDecoder::plan_workspace (device; backend/cuda/cuda_plan.h)
  int64_t activation_bytes = 0;  // CPU: the decoder's activations and scratch, of workspace_bytes (CpuModelOps)
  int64_t host_pinned_bytes = 0;  // CUDA: page-locked host staging (CudaDecoder::plan_workspace's pinned); CPU: 0
  // Decode batch sizes to capture as CUDA graphs, ascending, each 1..max_seqs; empty when graphs are off. Planned
  // whatever the device (the plan is made before the backend is chosen); the CPU backend ignores it.
  std::vector<int32_t> graph_buckets;
  bool graph_dedup = false;     // buckets share executables through cuGraphExecUpdate (vt_cuda_graphs.dedup)
  bool graph_first_use = false;  // each bucket captured by its first decode step (vt_cuda_graphs.first_use)
  bool prefix_caching = true;   // full KV blocks reused across requests (vt_engine_params.prefix_caching); off
                                // for models with state slots (a block's K/V alone cannot resume a recurrence)
  // The engine's switches (tuning.h) as they were when the plan was made: the estimate, the plan and the
  // constructors all size and build from these.
  Tuning tuning;
};

// The default CUDA-graph buckets for a largest batch: the powers of two up to it, and it when it is not one.
std::vector<int32_t> default_graph_buckets(int32_t max_batch);

// Validates the params against the model and sizes everything. Throws vt::Error (INVALID_OPTION, OUT_OF_MEMORY,
// and NO_GPU for device 'cuda' where CUDA is not usable).
MemoryPlan plan_memory(const ModelConfig &c, const vt_engine_params &p);

// plan_memory, with gpu_memory_utilization turned into a KV pool size: utilization x the GPU's total memory,
// less the weights (weight_bytes, as the checkpoint stores them), the device workspaces and a reserve for the
// CUDA graphs and the driver's own allocations. On the CPU (or when unset) it is plan_memory(c, p).
MemoryPlan plan_memory_for(const ModelConfig &c, const vt_engine_params &p, int64_t weight_bytes);

// Whether the CUDA backend runs an engine with these params: 'cuda' needs a usable GPU (never a silent CPU
// fallback: ERR_NO_GPU), 'auto' takes one when there is one.
bool uses_cuda(const vt_engine_params &p);

// /proc/meminfo MemAvailable in bytes, or -1 when it cannot be read.
int64_t host_memory_available();

}  // namespace vt
