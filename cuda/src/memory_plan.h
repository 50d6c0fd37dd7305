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
  int32_t n_threads = 0;
  // The KV pool (fp32 on the CPU, the activation type on the GPU). n_blocks is its ceiling: the blocks the block
  // manager may hand out at most. A growing pool (CUDA with virtual memory management: backend/cuda/kv_pool.h) maps
  // n_blocks_base blocks at load and keeps them when idle, and maps kv_chunk_blocks more at a time as requests need
  // them; a fixed one (the CPU's, a GPU without virtual memory management) holds all n_blocks from the load.
  int32_t n_blocks = 0;
  int32_t n_blocks_base = 0;     // room for max(max_context, 4096) tokens (whole chunks), at most n_blocks
  int32_t kv_chunk_blocks = 0;   // 0: a fixed pool
  int64_t kv_bytes_per_token = 0;
  int64_t kv_cache_bytes = 0;   // the ceiling's n_blocks blocks: as reserved (CPU: virtual until written)
  int64_t kv_base_bytes = 0;    // what the load maps: n_blocks_base blocks in whole chunks (a fixed pool: all of it)
  // How long the engine must have been idle before a growing pool gives its chunks above the base back: long enough
  // that a burst following another (a benchmark's timed run after its warm-up) does not map them all again, short
  // enough that an idle server's memory is back within a second. Tests set 0.
  int32_t kv_trim_delay_ms = 1000;
  StateLayout state;            // what the model's layers keep per sequence (the registry's state_layout)
  // The state slots (fp32 on every backend), laid out state_slot_stride bytes apart: a slot's bytes on the CPU and
  // on a GPU without virtual memory management, where they are a fixed set held from the load; padded on a GPU that
  // maps them in chunks as sequences need them (cuda::slot_layout), whose load maps the first chunk and keeps it when
  // idle. The chunk's slots hold at least one sequence, so the engine can always run one, as its KV base guarantees.
  int32_t n_state_slots = 0;    // max_seqs when some layer keeps a state slot, else 0: the ceiling
  int64_t state_slot_bytes = 0; // the ceiling: every slot, n_state_slots x state_slot_stride
  int64_t state_slot_stride = 0;
  int32_t state_slot_chunk = 0;       // slots a chunk maps; 0: a fixed set
  int32_t n_state_slots_base = 0;     // usable from the load on: the first chunk (a fixed set: all)
  int64_t state_slot_base_bytes = 0;  // what the load maps of them: the first chunk, whole (a fixed set: all)
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

// maxSeqs when the params leave it 0: more seats on a GPU, where a decode step's cost hardly grows with its rows.
constexpr int32_t kDefaultMaxSeqsCuda = 256, kDefaultMaxSeqsCpu = 64;
// The CUDA pool's ceiling leaves this much of the device for what no engine buffer accounts for: graph executables
// (6 MiB for 8 buckets on an H200), the kernel modules, cuBLASLt's handle, the driver's own per-context allocations.
constexpr int64_t kGpuReserveBytes = int64_t(256) << 20;

// GPU 0 as a plan needs it (cuda_gpu_facts in backend/cuda/cuda_plan.h; tests make one up).
struct GpuFacts {
  int32_t sm_count = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = -1;   // free now, under the context the engine will share; -1: not asked
  bool vmm = false;          // virtual memory management: the KV pool can grow in chunks
  int64_t granularity = 0;   // of physical allocations, bytes
};

// Validates the params against the model and sizes everything, the KV pool at its load-time size where its ceiling
// depends on the weights or the device's free memory (plan_memory_for sizes that). Throws vt::Error (INVALID_OPTION,
// OUT_OF_MEMORY, and NO_GPU for device 'cuda' where CUDA is not usable).
MemoryPlan plan_memory(const ModelConfig &c, const vt_engine_params &p);

// plan_memory with the KV pool's ceiling on the GPU: kv_cache_bytes when given; from gpu_memory_utilization,
// utilization x the GPU's total memory less the weights (weight_bytes, as the checkpoint stores them), the device
// workspaces, the state slots' ceiling (the budget holds both at their most) and kGpuReserveBytes; by default what
// the GPU has free now (its primary context retained for the question: hold it across the load, CudaDeviceHold) less
// the same but the state slots' base only (the pool and the slots then both grow into what is free, and either stops
// where the device's memory ends), at most max_seqs x max_context tokens. On the CPU it is plan_memory(c, p).
MemoryPlan plan_memory_for(const ModelConfig &c, const vt_engine_params &p, int64_t weight_bytes);

// The sizing itself, given the GPU's facts (null: the CPU backend). plan_memory and plan_memory_for ask the device
// and call it; tests call it with made-up devices.
MemoryPlan plan_memory_on(const ModelConfig &c, const vt_engine_params &p, int64_t weight_bytes, const GpuFacts *gpu);

// Whether the CUDA backend runs an engine with these params: 'cuda' needs a usable GPU (never a silent CPU
// fallback: ERR_NO_GPU), 'auto' takes one when there is one.
bool uses_cuda(const vt_engine_params &p);

// /proc/meminfo MemAvailable in bytes, or -1 when it cannot be read.
int64_t host_memory_available();

}  // namespace vt
