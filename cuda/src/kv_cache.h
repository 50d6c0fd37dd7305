// The paged KV cache's storage on the CPU backend: per layer, K and V pools of fixed-size blocks.
// Which block belongs to which sequence is the block manager's business (integers only); this holds bytes.
// The pools are one anonymous mapping, so blocks never written cost no resident memory.
#pragma once

#include <cstdint>

namespace vt {

class KvCache {
 public:
  KvCache(int32_t n_layers, int32_t n_blocks, int32_t block_size, int32_t n_kv_heads, int32_t head_dim);
  ~KvCache();
  KvCache(const KvCache &) = delete;
  KvCache &operator=(const KvCache &) = delete;

  // (n_blocks, block_size, n_kv_heads, head_dim) fp32 for one layer
  float *k(int32_t layer) { return base_ + int64_t(layer) * 2 * layer_floats_; }
  float *v(int32_t layer) { return base_ + (int64_t(layer) * 2 + 1) * layer_floats_; }

  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t bytes() const { return bytes_; }
  int64_t resident_bytes() const;  // pages ever written (mincore)
  // K and V of one token over every layer, elem_bytes per element (this cache's fp32 by default; the CUDA
  // backend's cache is in its activation type, 2 bytes for bf16).
  static int64_t bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                 int64_t elem_bytes = int64_t(sizeof(float))) {
    return int64_t(n_layers) * 2 * n_kv_heads * head_dim * elem_bytes;
  }

 private:
  float *base_ = nullptr;
  int64_t layer_floats_ = 0;
  int64_t bytes_ = 0;
  int32_t n_blocks_, block_size_;
};

}  // namespace vt
