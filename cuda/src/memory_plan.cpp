#include "memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "kv_cache.h"
#include "status.h"

namespace vt {

namespace {
void check_option(bool ok, const std::string &what) {
  if (!ok) fail(VT_ERR_INVALID_OPTION, what);
}
}  // namespace

MemoryPlan plan_memory(const ModelConfig &c, const vt_engine_params &p) {
  check_option(p.device == VT_DEVICE_AUTO || p.device == VT_DEVICE_CPU || p.device == VT_DEVICE_CUDA, "device must be auto, cpu or cuda");
  check_option(p.dtype == VT_DTYPE_AUTO || p.dtype == VT_DTYPE_FLOAT32 || p.dtype == VT_DTYPE_BFLOAT16,
               "dtype must be auto, float32 or bfloat16");
  check_option(p.n_threads >= 0 && p.n_threads <= 1024, "threads must be between 0 (all cores) and 1024");
  check_option(p.max_context >= 0, "maxContext must be >= 0");
  check_option(p.max_seqs >= 0 && p.max_seqs <= 4096, "maxSeqs must be between 0 (default) and 4096");
  check_option(p.max_batch_tokens >= 0 && p.max_batch_tokens <= 1 << 20, "maxBatchTokens must be between 0 (default) and 1048576");
  check_option(p.kv_block_size >= 0 && p.kv_block_size <= 1024, "kvBlockSize must be between 0 (default) and 1024");
  check_option(p.kv_cache_bytes >= 0, "kvCacheBytes must be >= 0");

  MemoryPlan m;
  const int32_t max_pos = c.max_position_embeddings;
  m.max_context = p.max_context > 0 ? p.max_context : std::min(max_pos, 8192);
  check_option(m.max_context <= max_pos, "maxContext " + std::to_string(m.max_context) +
                                             " exceeds the model's max_position_embeddings (" + std::to_string(max_pos) + ")");
  m.block_size = p.kv_block_size > 0 ? p.kv_block_size : 16;
  m.max_seqs = p.max_seqs > 0 ? p.max_seqs : 64;
  m.max_batch_tokens = p.max_batch_tokens > 0 ? p.max_batch_tokens : 512;
  m.n_threads = p.n_threads > 0 ? p.n_threads : int32_t(std::max(1u, std::thread::hardware_concurrency()));

  m.kv_bytes_per_token = KvCache::bytes_per_token(c.n_layers, c.n_kv_heads, c.head_dim);
  const int64_t pool_tokens = p.kv_cache_bytes > 0 ? p.kv_cache_bytes / m.kv_bytes_per_token
                                                   : std::max<int64_t>(m.max_context, 4096);
  const int64_t n_blocks = pool_tokens / m.block_size;
  if (n_blocks * m.block_size < m.max_context)
    fail(VT_ERR_OUT_OF_MEMORY, "kvCacheBytes " + std::to_string(p.kv_cache_bytes) + " holds " +
                                   std::to_string(n_blocks * m.block_size) + " tokens, fewer than maxContext " +
                                   std::to_string(m.max_context) + " (each token needs " + std::to_string(m.kv_bytes_per_token) +
                                   " bytes); raise kvCacheBytes or lower maxContext");
  check_option(n_blocks <= INT32_MAX, "kvCacheBytes is too large");
  m.n_blocks = int32_t(n_blocks);
  m.kv_cache_bytes = n_blocks * m.block_size * m.kv_bytes_per_token;

  // The dense decoder's RunState (see models/dense_decoder.h) plus the runner's logits and the sampler.
  const int64_t T = m.max_batch_tokens, H = c.hidden_size, I = c.intermediate_size;
  const int64_t QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim, V = c.vocab_size;
  const int64_t activations = T * (4 * H + 2 * QD + 2 * KVD + 2 * I);
  const int64_t logits = int64_t(m.max_seqs) * V + 16 * V;  // sampled rows + the teacher-forcing block
  const int64_t sampler = 3 * V;
  m.workspace_bytes = (activations + logits + sampler) * int64_t(sizeof(float));
  return m;
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
