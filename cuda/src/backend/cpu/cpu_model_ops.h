// The CPU backend's ModelOps (models/model_ops.h): each op one CPU kernel after another (backend/cpu/cpu_ops.h),
// in fp32, on the thread pool; activations in pages of their own (host_pages.h), the KV cache the engine's.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "host_pages.h"
#include "kv_cache.h"
#include "loader/config.h"
#include "models/model_ops.h"

namespace vt {

class CpuModelOps : public ModelOps {
 public:
  CpuModelOps(const ModelConfig &c, cpu::ThreadPool &pool, KvCache &kv, int32_t max_tokens);
  // Sizing only (memory_plan.cpp): the same declarations, nothing allocated, nothing run; bytes() is what the
  // engine's CpuModelOps will allocate. One code path sizes both, so the estimate and the load cannot disagree.
  CpuModelOps(const ModelConfig &c, int32_t max_tokens);

  // Activation and scratch bytes, from the declarations (what a sizing instance reports), and from the buffers
  // themselves (an engine's instance): the two agree, test_model_ops checks it for every fixture.
  int64_t bytes() const;
  int64_t allocated_bytes() const;

  Tensor tensor(std::initializer_list<int64_t> parts, Storage storage = Storage::kActivation) override;
  Linear linear_weights(std::initializer_list<const Matrix *> parts,
                        std::initializer_list<const std::vector<float> *> biases = {}) override;
  Vector vector_weights(const std::vector<float> &v) override;
  Attention attention_kind(const AttentionGeometry &g) override;

  // The step the model's ops run over: the batch, and its tokens (the batch's, or the picks a chained step takes).
  void begin_step(const ForwardBatch &b, const int32_t *tokens);
  void embed(Linear table, Tensor out) override;
  void rmsnorm(Tensor x, Vector norm, Tensor out) override;
  void linear(Tensor x, Linear w, Tensor out, const Epilogue &e = {}) override;
  void attention(Tensor qkv, Attention a, int32_t layer, Tensor out) override;
  Recurrent gdn_weights(const GdnWeights &w) override;
  void gated_delta_net(Tensor in, Recurrent r, Tensor out) override;
  // logits (n, vocab) fp32 of the given rows of x through `head` (a one-matrix Linear, (vocab, hidden)).
  void logits(Tensor x, const int32_t *rows, int32_t n, Linear head, float *out);

 private:
  struct Part {
    int64_t cols;
    PageVector<float> data;  // (max_tokens, cols)
  };
  struct LinearW {
    std::vector<const Matrix *> parts;
    std::vector<const float *> biases;  // null: none
  };
  float *part(Tensor t, size_t p);
  const Matrix &matrix(Linear w) const { return *linears_.at(size_t(w)).parts.at(0); }
  void product(const float *x, const LinearW &w, size_t p, float *y);
  void reserve(PageVector<float> &v, int64_t cols);  // (max_tokens, cols), counted; allocated unless sizing

  const ModelConfig &c_;
  cpu::ThreadPool *pool_ = nullptr;  // null: sizing only
  KvCache *kv_ = nullptr;
  int32_t max_tokens_;
  // The attention kinds: geometry and RoPE tables (rotary_dims / 2 frequencies). A gated kind's kRopeStore leaves
  // its q and gate apart (q_proj gives them interleaved per head) in q_ and gate_, for its attention.
  struct AttnKind {
    AttentionGeometry g;
    std::vector<float> inv_freq;
    float rope_scale = 1.f;
  };
  std::vector<AttnKind> kinds_;
  int64_t gated_cols_ = 0;
  PageVector<float> q_, gate_;
  std::vector<std::vector<Part>> tensors_;
  std::vector<LinearW> linears_;
  std::vector<const std::vector<float> *> vectors_;  // the weights' own (the CPU reads them where they are)
  const float *vec(Vector v) const { return v == kNoVector ? nullptr : vectors_.at(size_t(v))->data(); }
  // The step
  const ForwardBatch *b_ = nullptr;
  const int32_t *tokens_ = nullptr;
  // Scratch: a linear's output before its epilogue (kAddNorm: the sublayer's output, as wide as the residual it is
  // added to; kSwiGLU: up, a two-part layer's second part), and the rows gathered for logits(). Sized at load from
  // the residual tensors and the two-part linear layers declared.
  int64_t proj_cols_ = 0, up_cols_ = 0;
  PageVector<float> proj_, up_, gathered_;
  // Gated DeltaNet layers: their weights, and the scratch of the widest (the conv's output (T, C), the gates
  // beta and g (T, Hv) each); per step, which sequences start from zero states.
  std::vector<GdnWeights> gdns_;
  int64_t conv_cols_ = 0, gate_cols_ = 0;
  PageVector<float> conv_out_, beta_, g_;
  std::vector<int32_t> fresh_;
};

}  // namespace vt
