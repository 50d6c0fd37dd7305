#include "models/dense_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "sampling.h"

namespace vt {

DenseDecoder::DenseDecoder(const ModelConfig &config, Weights weights, cpu::ThreadPool &pool, KvCache &kv,
                           int32_t max_tokens, const CpuTuning &tuning)
    : c_(config), w_(std::move(weights)), pool_(pool), kv_(kv), max_tokens_(max_tokens), overlap_(tuning.overlap) {
  rope_tables(c_, &inv_freq_, &rope_scale_);
  const int64_t T = max_tokens, H = c_.hidden_size;
  const int64_t QD = int64_t(c_.n_heads) * c_.head_dim, KVD = int64_t(c_.n_kv_heads) * c_.head_dim;
  residual_.resize(T * H);
  normed_.resize(T * H);
  q_.resize(T * QD);
  k_.resize(T * KVD);
  v_.resize(T * KVD);
  attn_.resize(T * QD);
  proj_.resize(T * H);
  gate_.resize(T * c_.intermediate_size);
  up_.resize(T * c_.intermediate_size);
  last_.resize(T * H);
}

static const float *bias_or_null(const std::vector<float> &b) { return b.empty() ? nullptr : b.data(); }

static void linear(cpu::ThreadPool &pool, const float *x, int64_t T, const Matrix &m, const std::vector<float> &bias,
                   float *y) {
  cpu::matmul(pool, x, T, m.cols, m.data, m.dtype, m.rows, bias_or_null(bias), y);
}

void DenseDecoder::attention_block(int l, const ForwardBatch &b, KvCache &kv) {
  const LayerWeights &L = w_.layers[l];
  const int32_t T = b.n_tokens;
  linear(pool_, normed_.data(), T, L.q, L.q_bias, q_.data());
  linear(pool_, normed_.data(), T, L.k, L.k_bias, k_.data());
  linear(pool_, normed_.data(), T, L.v, L.v_bias, v_.data());
  if (c_.qk_norm) {  // Qwen3: RMSNorm over each head's vector
    cpu::rmsnorm(pool_, q_.data(), int64_t(T) * c_.n_heads, c_.head_dim, L.q_norm.data(), c_.rms_norm_eps);
    cpu::rmsnorm(pool_, k_.data(), int64_t(T) * c_.n_kv_heads, c_.head_dim, L.k_norm.data(), c_.rms_norm_eps);
  }
  cpu::rope(pool_, q_.data(), T, c_.n_heads, c_.head_dim, b.positions, inv_freq_.data(), rope_scale_);
  cpu::rope(pool_, k_.data(), T, c_.n_kv_heads, c_.head_dim, b.positions, inv_freq_.data(), rope_scale_);
  cpu::kv_store(k_.data(), v_.data(), T, c_.n_kv_heads, c_.head_dim, b.slots, kv.k(l), kv.v(l));
  const float scale = 1.0f / std::sqrt(float(c_.head_dim));
  cpu::attention(pool_, q_.data(), kv.k(l), kv.v(l), b.attn, c_.n_heads, c_.n_kv_heads, c_.head_dim, scale, attn_.data());
  linear(pool_, attn_.data(), T, L.o, L.o_bias, proj_.data());
}

void DenseDecoder::mlp_block(int l, int32_t T) {
  const LayerWeights &L = w_.layers[l];
  linear(pool_, normed_.data(), T, L.gate, L.gate_bias, gate_.data());
  linear(pool_, normed_.data(), T, L.up, L.up_bias, up_.data());
  cpu::silu_mul(pool_, gate_.data(), up_.data(), T, c_.intermediate_size, gate_.data());
  linear(pool_, gate_.data(), T, L.down, L.down_bias, proj_.data());
}

void DenseDecoder::forward(const ForwardBatch &b) {
  const int32_t T = b.n_tokens;
  const int64_t H = c_.hidden_size;
  const float eps = c_.rms_norm_eps;

  const int32_t *tokens = b.tokens;
  if (b.tokens_from_picks) {  // the last begun read's picks (chains)
    if (begun_.empty() || int32_t(begun_.back().size()) < T)
      throw std::logic_error("DenseDecoder::forward: picks as tokens without the step before");
    tokens = begun_.back().data();
  }
  cpu::embed(w_.embed.data, w_.embed.dtype, H, tokens, T, residual_.data());
  std::copy(residual_.begin(), residual_.begin() + T * H, normed_.begin());
  cpu::rmsnorm(pool_, normed_.data(), T, H, w_.layers[0].attn_norm.data(), eps);

  for (int l = 0; l < c_.n_layers; ++l) {
    attention_block(l, b, kv_);
    // residual += attention output; normed = post_attention_layernorm(residual)
    cpu::add_rmsnorm(pool_, residual_.data(), proj_.data(), T, H, w_.layers[l].mlp_norm.data(), eps, normed_.data());
    mlp_block(l, T);
    // residual += mlp output; normed = next layer's input_layernorm (or the final norm)
    const float *next_norm = l + 1 < c_.n_layers ? w_.layers[l + 1].attn_norm.data() : w_.final_norm.data();
    cpu::add_rmsnorm(pool_, residual_.data(), proj_.data(), T, H, next_norm, eps, normed_.data());
  }

}

void DenseDecoder::project(const int32_t *rows, int32_t n, float *logits) {
  if (n <= 0) return;
  const int64_t H = c_.hidden_size;
  for (int32_t i = 0; i < n; ++i) std::copy_n(normed_.data() + int64_t(rows[i]) * H, H, last_.data() + int64_t(i) * H);
  cpu::matmul(pool_, last_.data(), n, H, w_.lm_head.data, w_.lm_head.dtype, w_.lm_head.rows, nullptr, logits);
}

void DenseDecoder::chain_begin(int32_t n, const cuda::SampleRow *params) {
  if (begun_.size() >= 2 || n < 1 || n > max_tokens_ || params)
    throw std::logic_error("DenseDecoder::chain_begin: a third read, or sampled rows");
  const int64_t V = w_.lm_head.rows;
  logits_.resize(size_t(n) * size_t(V));
  std::vector<int32_t> rows(static_cast<size_t>(n)), picks(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) rows[size_t(i)] = i;
  project(rows.data(), n, logits_.data());
  SamplingParams greedy;  // temperature 0, no logprobs: the argmax, ties to the lowest id
  Rng rng;
  SamplerScratch scratch;
  for (int32_t i = 0; i < n; ++i)
    picks[size_t(i)] = vt::sample(logits_.data() + int64_t(i) * V, int32_t(V), greedy, rng, scratch).token;
  begun_.push_back(std::move(picks));
}

void DenseDecoder::chain_end(int32_t *ids) {
  if (begun_.empty()) throw std::logic_error("DenseDecoder::chain_end: no read begun");
  std::copy(begun_.front().begin(), begun_.front().end(), ids);
  begun_.erase(begun_.begin());
}

}  // namespace vt
