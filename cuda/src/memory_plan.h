// How much memory an engine will take, from its config and load params alone — the one place that sizes the
// KV pool and the workspaces, so Engine::load and vt_engine_estimate can never disagree.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/config.h"
#include "vt_engine.h"

namespace vt {

struct MemoryPlan {
  int32_t max_context = 0;
  int32_t block_size = 0;
  int32_t max_seqs = 0;
  int32_t max_batch_tokens = 0;
  int32_t n_blocks = 0;
  int32_t n_threads = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_cache_bytes = 0;   // the whole pool, resident once every block has been used
  int64_t workspace_bytes = 0;  // activations for max_batch_tokens rows, logits, sampler scratch
  // Decode batch sizes to capture as CUDA graphs, ascending, each 1..max_seqs; empty when graphs are off. Planned
  // whatever the device (the plan is made before the backend is chosen); the CPU backend ignores it.
  std::vector<int32_t> graph_buckets;
  bool graph_dedup = false;     // buckets share executables through cuGraphExecUpdate (vt_cuda_graphs.dedup)
};

// The default CUDA-graph buckets for a largest batch: the powers of two up to it, and it when it is not one.
std::vector<int32_t> default_graph_buckets(int32_t max_batch);

// Validates the params against the model and sizes everything. Throws vt::Error (INVALID_OPTION, OUT_OF_MEMORY).
MemoryPlan plan_memory(const ModelConfig &c, const vt_engine_params &p);

// /proc/meminfo MemAvailable in bytes, or -1 when it cannot be read.
int64_t host_memory_available();

}  // namespace vt
