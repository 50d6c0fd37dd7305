// The dense decoder's weights, as views into the checkpoint mapping (big matrices, used in place) plus fp32
// copies of the small vectors (norms, biases), whose conversion is cheap and keeps the hot loops simple.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtype.h"
#include "loader/config.h"
#include "loader/safetensors.h"

namespace vt {

struct Matrix {  // (rows, cols) row-major, HF Linear layout: one row per output feature
  const void *data = nullptr;
  DType dtype = DType::BF16;
  int64_t rows = 0, cols = 0;
  int64_t bytes() const { return rows * cols * int64_t(dtype_size(dtype)); }
};

struct LayerWeights {
  std::vector<float> attn_norm;          // (hidden)
  Matrix q, k, v, o;                     // q (n_heads*head_dim, hidden) · k,v (n_kv*head_dim, hidden) · o (hidden, n_heads*head_dim)
  std::vector<float> q_bias, k_bias, v_bias, o_bias;  // empty when the checkpoint has none
  std::vector<float> q_norm, k_norm;     // (head_dim), Qwen3 only
  std::vector<float> mlp_norm;           // (hidden)
  Matrix gate, up, down;                 // gate,up (intermediate, hidden) · down (hidden, intermediate)
  std::vector<float> gate_bias, up_bias, down_bias;
};

struct Weights {
  Matrix embed;                 // (vocab, hidden)
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // (hidden)
  Matrix lm_head;               // (vocab, hidden); the embedding when tied
  int64_t n_params = 0;         // elements of every tensor used (the tied lm_head counted once)
  int64_t bytes = 0;            // their bytes in the checkpoint
  int64_t host_bytes = 0;       // the fp32 copies of small vectors, in host memory
  DType dtype = DType::BF16;    // dtype of the embedding (the dominant one)
};

// Binds every tensor the config implies (biases exactly as ModelConfig says); throws ERR_SHAPE_MISMATCH /
// ERR_UNSUPPORTED_DTYPE / ERR_BAD_CHECKPOINT naming the tensor. A tensor the model does not use is
// ERR_BAD_CHECKPOINT too: the config then describes another model than the weights. `progress(done, total)` is
// called after each layer.
Weights bind_weights(const ModelConfig &c, const Checkpoint &ck, const std::function<void(int, int)> &progress);

}  // namespace vt
