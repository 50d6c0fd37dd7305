#include "memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "backend/cpu/cpu_model_ops.h"
#include "backend/cuda/cuda_plan.h"
#include "backend/cuda/kv_pool.h"
#include "models/registry.h"
#include "status.h"

namespace vt {

namespace {
void check_option(bool ok, const std::string &what) {
  if (!ok) fail(VT_ERR_INVALID_OPTION, what);
}

constexpr int32_t kGraphMaxBatch = 4096;
// Buckets up to CUDA's default maxSeqs (kDefaultMaxSeqsCuda), so a full default batch of decodes replays a graph.
constexpr int32_t kGraphDefaultMaxBatch = 256;
constexpr int32_t kGraphBucketsCap = int32_t(sizeof(vt_cuda_graphs::buckets) / sizeof(int32_t));

// Checks p.cuda_graphs against maxSeqs and returns the buckets to capture (empty when off). Given buckets are bound
// by maxSeqs when it is given, else by the GPU's default (the CPU ignores them: a configuration that names buckets
// up to the GPU's default loads on either backend).
std::vector<int32_t> plan_graph_buckets(const vt_cuda_graphs &g, int32_t given_max_seqs, int32_t max_seqs) {
  check_option(g.enabled >= -1 && g.enabled <= 1, "cudaGraphs.enabled must be -1 (default), 0 (off) or 1 (on)");
  check_option(g.max_batch >= 0 && g.max_batch <= kGraphMaxBatch,
               "cudaGraphs.maxBatch must be between 0 (default) and " + std::to_string(kGraphMaxBatch));
  check_option(g.n_buckets >= 0 && g.n_buckets <= kGraphBucketsCap,
               "cudaGraphs.buckets holds 0 (default) to " + std::to_string(kGraphBucketsCap) + " batch sizes");
  check_option(g.dedup == 0 || g.dedup == 1, "cudaGraphs.dedup must be 0 or 1");
  check_option(g.first_use == 0 || g.first_use == 1, "cudaGraphs.first_use must be 0 (capture at load) or 1 (at first use)");
  for (int32_t i = 0; i < g.n_buckets; ++i) {
    const int32_t b = g.buckets[i];
    const int32_t bound = given_max_seqs > 0 ? given_max_seqs : kDefaultMaxSeqsCuda;
    check_option(b >= 1 && b <= bound, "cudaGraphs.buckets[" + std::to_string(i) + "] is " + std::to_string(b) +
                                           "; each bucket must be from 1 to maxSeqs (" + std::to_string(bound) +
                                           (given_max_seqs > 0 ? ")" : ", its default on the GPU)"));
    // The message names buckets[i - 1], so it is built only when there is one (i > 0) and the check failed.
    if (i > 0 && b <= g.buckets[i - 1])
      fail(VT_ERR_INVALID_OPTION, "cudaGraphs.buckets must be strictly ascending; buckets[" + std::to_string(i) + "] is " +
                                      std::to_string(b) + ", after " + std::to_string(g.buckets[i - 1]));
  }
  if (g.n_buckets > 0)
    check_option(g.max_batch == 0 || g.max_batch >= g.buckets[g.n_buckets - 1],
                 "cudaGraphs.maxBatch " + std::to_string(g.max_batch) + " is below the largest bucket (" +
                     std::to_string(g.buckets[g.n_buckets - 1]) + ")");

  if (g.enabled == 0) return {};
  if (g.n_buckets > 0) return std::vector<int32_t>(g.buckets, g.buckets + g.n_buckets);
  // A step never holds more than max_seqs sequences, so a larger bucket could never be replayed.
  return default_graph_buckets(std::min(g.max_batch > 0 ? g.max_batch : kGraphDefaultMaxBatch, max_seqs));
}
}  // namespace

bool uses_cuda(const vt_engine_params &p) {
  if (p.device == VT_DEVICE_CPU) return false;
  std::string why;
  if (cuda_usable(&why)) return true;
  if (p.device == VT_DEVICE_CUDA)
    fail(VT_ERR_NO_GPU, "device 'cuda' was asked for, but CUDA is not usable here: " + why + "; use device 'cpu' or 'auto'");
  return false;
}


std::vector<int32_t> default_graph_buckets(int32_t max_batch) {
  std::vector<int32_t> buckets;
  for (int64_t b = 1; b <= max_batch; b *= 2) buckets.push_back(int32_t(b));
  if (max_batch > 0 && buckets.back() != max_batch) buckets.push_back(max_batch);
  return buckets;
}

namespace {

void check_params(const vt_engine_params &p) {
  check_option(p.device == VT_DEVICE_AUTO || p.device == VT_DEVICE_CPU || p.device == VT_DEVICE_CUDA, "device must be auto, cpu or cuda");
  check_option(p.dtype == VT_DTYPE_AUTO || p.dtype == VT_DTYPE_FLOAT32 || p.dtype == VT_DTYPE_BFLOAT16,
               "dtype must be auto, float32 or bfloat16");
  check_option(p.n_threads >= 0 && p.n_threads <= 1024, "threads must be between 0 (all cores) and 1024");
  check_option(p.max_context >= 0, "maxContext must be >= 0");
  check_option(p.max_seqs >= 0 && p.max_seqs <= 4096, "maxSeqs must be between 0 (default) and 4096");
  check_option(p.max_batch_tokens >= 0 && p.max_batch_tokens <= 1 << 20, "maxBatchTokens must be between 0 (default) and 1048576");
  check_option(p.kv_block_size >= 0 && p.kv_block_size <= 1024, "kvBlockSize must be between 0 (default) and 1024");
  check_option(p.kv_cache_bytes >= 0, "kvCacheBytes must be >= 0");
  check_option(p.gpu_memory_utilization >= 0 && p.gpu_memory_utilization <= 1,
               "gpuMemoryUtilization must be in (0, 1], or 0 for unset");
  check_option(p.gpu_memory_utilization == 0 || p.kv_cache_bytes == 0,
               "give kvCacheBytes or gpuMemoryUtilization, not both: each sizes the KV pool");
  check_option(p.prefix_caching >= -1 && p.prefix_caching <= 1, "prefix_caching must be 0 (default: on), 1 (on) or -1 (off)");
}

std::string mib(int64_t bytes) { return std::to_string(std::max<int64_t>(bytes, 0) >> 20) + " MiB"; }

// The KV pool's ceiling in blocks, n_blocks_base and kv_chunk_blocks (MemoryPlan's pool fields), for a plan whose
// workspaces are sized. block_bytes: one block over every plane; the pool must hold max_context tokens.
void plan_pool(MemoryPlan &m, const vt_engine_params &p, int64_t weight_bytes, const GpuFacts *gpu) {
  const int64_t bs = m.block_size, block_bytes = m.kv_bytes_per_token * bs;
  const int64_t base_blocks = (std::max<int64_t>(m.max_context, 4096) + bs - 1) / bs;  // whole blocks, rounded up
  const int64_t need_blocks = (int64_t(m.max_context) + bs - 1) / bs;
  const std::string per_token = " (each token needs " + std::to_string(m.kv_bytes_per_token) + " bytes)";
  // What the GPU's memory leaves the pool, after everything else the engine puts there: of the state slots, all of
  // them within a utilization budget (the engine stays inside it at its most), their base where the pool's ceiling
  // is the free memory (the pool and the slots both grow into it as requests come; whichever finds it gone waits).
  const auto others = [&](int64_t slots) { return weight_bytes + m.workspace_bytes + slots + kGpuReserveBytes; };
  const auto others_text = [&](int64_t slots) {
    return "weights " + mib(weight_bytes) + ", workspaces " + mib(m.workspace_bytes) +
           (slots > 0 ? ", state slots " + mib(slots) : std::string()) + " and a " + mib(kGpuReserveBytes) + " reserve";
  };
  int64_t n_blocks = base_blocks;
  bool fixed = gpu == nullptr || !gpu->vmm;
  if (p.kv_cache_bytes > 0) {
    n_blocks = p.kv_cache_bytes / block_bytes;  // the bytes asked for, in whole blocks
    if (n_blocks < need_blocks)
      fail(VT_ERR_OUT_OF_MEMORY, "kvCacheBytes " + std::to_string(p.kv_cache_bytes) + " holds " + std::to_string(n_blocks * bs) +
                                     " tokens, fewer than maxContext " + std::to_string(m.max_context) + per_token +
                                     "; raise kvCacheBytes to at least " + std::to_string(need_blocks * block_bytes) +
                                     " or lower maxContext");
  } else if (gpu && p.gpu_memory_utilization > 0) {
    const int64_t budget = int64_t(double(gpu->total_bytes) * p.gpu_memory_utilization);
    const int64_t kv = budget - others(m.state_slot_bytes);
    n_blocks = std::max<int64_t>(kv, 0) / block_bytes;
    if (n_blocks < need_blocks)
      fail(VT_ERR_OUT_OF_MEMORY, "gpuMemoryUtilization " + std::to_string(p.gpu_memory_utilization) + " gives this engine " +
                                     mib(budget) + " of the GPU's " + mib(gpu->total_bytes) + ": " +
                                     others_text(m.state_slot_bytes) + " leave " +
                                     mib(kv) + " for the KV cache, less than maxContext " + std::to_string(m.max_context) +
                                     " tokens need (" + mib(need_blocks * block_bytes) +
                                     "); raise gpuMemoryUtilization or lower maxContext (or maxBatchTokens, maxSeqs)");
  } else if (gpu && gpu->free_bytes >= 0 && gpu->vmm) {
    // By default the ceiling is what the GPU has free; the pool maps it only as requests need it. More than every
    // seat at maxContext could never be held at once (the cache lives in what they mapped).
    const int64_t kv = gpu->free_bytes - others(m.state_slot_base_bytes);
    n_blocks = std::min(std::max<int64_t>(kv, 0) / block_bytes, int64_t(m.max_seqs) * need_blocks);
    if (n_blocks < need_blocks)
      fail(VT_ERR_OUT_OF_MEMORY, "the GPU has " + mib(gpu->free_bytes) + " free: " + others_text(m.state_slot_base_bytes) +
                                     " leave " + mib(kv) +
                                     " for the KV cache, less than maxContext " + std::to_string(m.max_context) +
                                     " tokens need (" + mib(need_blocks * block_bytes) +
                                     "); lower maxContext (or maxBatchTokens, maxSeqs), or free GPU memory");
  } else if (gpu && gpu->free_bytes >= 0) {
    fixed = true;  // no chunks to grow by: the pool is the load-time one, whole (KvPool says so on stderr)
  }
  check_option(n_blocks <= INT32_MAX, "kvCacheBytes is too large");
  m.n_blocks = int32_t(n_blocks);
  m.kv_cache_bytes = n_blocks * block_bytes;
  if (fixed) {
    m.n_blocks_base = m.n_blocks, m.kv_chunk_blocks = 0;
    m.kv_base_bytes = m.kv_cache_bytes;
    return;
  }
  // A plane's block is a pool block over one plane (2 per attention layer): chunks of whole granules in each.
  const int64_t plane_block = block_bytes / (2 * int64_t(m.state.n_paged()));
  const int64_t chunk = kv_chunk_blocks(plane_block, gpu->granularity);
  const int64_t base = std::min<int64_t>(n_blocks, (base_blocks + chunk - 1) / chunk * chunk);
  m.kv_chunk_blocks = int32_t(std::min<int64_t>(chunk, INT32_MAX));
  m.n_blocks_base = int32_t(base);
  m.kv_base_bytes = (base + chunk - 1) / chunk * chunk * block_bytes;  // the last chunk is mapped whole
}

// The state slots (MemoryPlan's slot fields): a slot per seat; a fixed set on the CPU and on a GPU that cannot map
// in chunks, else a growing region laid out by cuda::slot_layout, whose load maps the first chunk.
void plan_slots(MemoryPlan &m, const GpuFacts *gpu) {
  if (!m.state.has_slots()) return;
  // A slot per seat; a paused sequence keeps its own (taken back, as its blocks are, when the seats need it).
  m.n_state_slots = m.max_seqs;
  const int64_t slot_bytes = m.state.slot_elems() * int64_t(sizeof(float));
  m.state_slot_stride = slot_bytes, m.state_slot_chunk = 0;
  if (gpu && gpu->vmm) {
    const StateSlotLayout l = state_slot_layout(slot_bytes, m.n_state_slots, gpu->granularity);
    m.state_slot_stride = l.stride, m.state_slot_chunk = l.chunk;
  }
  m.state_slot_bytes = int64_t(m.n_state_slots) * m.state_slot_stride;
  const bool grows = m.state_slot_chunk > 0;
  m.n_state_slots_base = grows ? std::min(m.n_state_slots, m.state_slot_chunk) : m.n_state_slots;
  m.state_slot_base_bytes = grows ? int64_t(m.state_slot_chunk) * m.state_slot_stride : m.state_slot_bytes;
}

}  // namespace

MemoryPlan plan_memory_on(const ModelConfig &c, const vt_engine_params &p, int64_t weight_bytes, const GpuFacts *gpu) {
  check_params(p);
  MemoryPlan m;
  m.tuning = tuning_from_env();
  m.cuda = gpu != nullptr;
  const int32_t max_pos = c.max_position_embeddings;
  m.max_context = p.max_context > 0 ? p.max_context : std::min(max_pos, 8192);
  check_option(m.max_context <= max_pos, "maxContext " + std::to_string(m.max_context) +
                                             " exceeds the model's max_position_embeddings (" + std::to_string(max_pos) + ")");
  m.block_size = p.kv_block_size > 0 ? p.kv_block_size : 16;
  m.max_seqs = p.max_seqs > 0 ? p.max_seqs : m.cuda ? kDefaultMaxSeqsCuda : kDefaultMaxSeqsCpu;
  m.max_batch_tokens = p.max_batch_tokens > 0 ? p.max_batch_tokens : 512;
  m.n_threads = p.n_threads > 0 ? p.n_threads : int32_t(std::max(1u, std::thread::hardware_concurrency()));
  m.graph_buckets = plan_graph_buckets(p.cuda_graphs, p.max_seqs, m.max_seqs);
  m.graph_dedup = p.cuda_graphs.dedup == 1;
  m.graph_first_use = p.cuda_graphs.first_use == 1;
  const ModelEntry &entry = model_entry(c);
  m.state = entry.state_layout(c);
  plan_slots(m, gpu);
  if (m.state.has_slots())
    check_option(p.prefix_caching != 1, "prefixCaching is not available for " + c.architecture +
                                            ": its recurrent layers keep a state per sequence that cached K/V blocks cannot restore");
  m.prefix_caching = p.prefix_caching != -1 && !m.state.has_slots();

  // The CPU's KV cache is fp32; the GPU's is in the activation type (bf16 unless float32 was asked for).
  const int64_t kv_elem = m.cuda && p.dtype != VT_DTYPE_FLOAT32 ? 2 : 4;
  m.kv_bytes_per_token = m.state.kv_bytes_per_token(kv_elem);
  if (m.kv_bytes_per_token <= 0)  // (a model of recurrent layers only: none is registered; its pool would be empty)
    fail(VT_ERR_UNSUPPORTED_ARCH, c.architecture + " has no attention layer; the engine needs at least one");

  if (m.cuda) {
    // cuBLASLt's workspace is counted whenever it may load (bf16 activations, not VT_CUDA_CUBLASLT=0): at most
    // 32 MiB too many, on a machine without the library.
    const CudaSizes sizes = cuda_sizes(c, m, p, gpu->sm_count);
    m.workspace_bytes = sizes.workspace_bytes, m.host_pinned_bytes = sizes.pinned_bytes;
  } else {
    // The CPU decoder's activations, sized by the code that allocates them (the model's declarations through a
    // sizing CpuModelOps), plus the runner's logits and the sampler.
    const Weights shapes = shape_weights(c, entry.schema(c));
    CpuModelOps sizing(c, m.max_batch_tokens);
    const std::unique_ptr<Model> model = entry.make(c, shapes, sizing);
    m.activation_bytes = sizing.bytes();
    const int64_t V = c.vocab_size;
    const int64_t logits = int64_t(m.max_seqs) * V + 16 * V;  // sampled rows + the teacher-forcing block
    const int64_t sampler = 3 * V;
    m.workspace_bytes = m.activation_bytes + (logits + sampler) * int64_t(sizeof(float));
  }
  plan_pool(m, p, weight_bytes, gpu);
  return m;
}

MemoryPlan plan_memory(const ModelConfig &c, const vt_engine_params &p) {
  check_params(p);  // (before uses_cuda, which trusts p.device)
  if (!uses_cuda(p)) return plan_memory_on(c, p, 0, nullptr);
  const GpuFacts gpu = cuda_gpu_facts(/*with_free=*/false);
  return plan_memory_on(c, p, 0, &gpu);
}

MemoryPlan plan_memory_for(const ModelConfig &c, const vt_engine_params &p, int64_t weight_bytes) {
  check_params(p);
  if (!uses_cuda(p)) return plan_memory_on(c, p, weight_bytes, nullptr);
  // Free memory is read only where it sizes the pool (the default ceiling): a context is made for it when none is held.
  const GpuFacts gpu = cuda_gpu_facts(/*with_free=*/p.kv_cache_bytes == 0 && p.gpu_memory_utilization == 0);
  return plan_memory_on(c, p, weight_bytes, &gpu);
}

int64_t host_memory_available() {
  FILE *f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "MemAvailable:", 13) == 0) {
      kb = std::strtoll(line + 13, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

}  // namespace vt
