// The dense decoder shared by Llama, Qwen2 and Qwen3 (pre-norm, RMSNorm, GQA attention with RoPE, SwiGLU MLP).
// What differs between them is data, not code: Qwen2 has q/k/v biases, Qwen3 normalises each head of q and k
// before RoPE, and each picks its own rope scaling. forward() reads top to bottom.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "host_pages.h"
#include "kv_cache.h"
#include "loader/config.h"
#include "loader/weights.h"
#include "models/decoder.h"
#include "tuning.h"

namespace vt {

class DenseDecoder : public Decoder {
 public:
  // tuning.overlap (VT_CPU_OVERLAP=1, tests): chain plain-greedy decode steps as the CUDA decoder does.
  DenseDecoder(const ModelConfig &config, Weights weights, cpu::ThreadPool &pool, KvCache &kv, int32_t max_tokens,
               const CpuTuning &tuning = {});

  void forward(const ForwardBatch &b) override;

  // Only rows that are needed pay for the large vocabulary projection.
  void project(const int32_t *rows, int32_t n, float *logits) override;

  const Weights &weights() const { return w_; }

  // The overlapped decode's interface (Decoder::chains), for tests only: with VT_CPU_OVERLAP=1 the engine chains
  // greedy decode steps here too (forward() runs at once, so nothing overlaps), which puts Engine::step_overlapped's
  // bookkeeping under the CPU golden tests. The picks are vt::sample's greedy ones.
  bool chains(int32_t n) const override { return overlap_ && n >= 1 && n <= max_tokens_; }
  void chain_begin(int32_t n, const cuda::SampleRow *params) override;  // greedy rows only (params null)
  void chain_end(int32_t *ids) override;

 private:
  void attention_block(int layer, const ForwardBatch &b, KvCache &kv);
  void mlp_block(int layer, int32_t T);

  ModelConfig c_;
  Weights w_;
  cpu::ThreadPool &pool_;
  KvCache &kv_;
  std::vector<float> inv_freq_;  // (head_dim / 2)
  float rope_scale_ = 1.f;
  int32_t max_tokens_;

  // RunState: activations for up to max_tokens rows, in pages of their own (host_pages.h says why)
  PageVector<float> residual_;  // (T, hidden) the running sum of the residual stream
  PageVector<float> normed_;    // (T, hidden) the normalised input of the current sub-block
  PageVector<float> q_;         // (T, n_heads * head_dim)
  PageVector<float> k_, v_;     // (T, n_kv_heads * head_dim)
  PageVector<float> attn_;      // (T, n_heads * head_dim)
  PageVector<float> proj_;      // (T, hidden) output of o_proj / down_proj before the residual add
  PageVector<float> gate_, up_; // (T, intermediate)
  PageVector<float> last_;      // (n, hidden) final-normed rows gathered for project()
  bool overlap_ = false;                    // CpuTuning::overlap (VT_CPU_OVERLAP=1, tests)
  std::vector<std::vector<int32_t>> begun_;  // picks of the begun reads, oldest first (the last: the next tokens)
  PageVector<float> logits_;                 // chain_begin's
};

}  // namespace vt
