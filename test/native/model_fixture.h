// What the model tests share (test/native/test_model_ops.cpp on the CPU, test/gpu/model_cuda.cpp on the GPU): a
// random tiny checkpoint, a float64 reference of the dense architecture written out here from its definition (HF's
// Llama / Qwen3 modeling: RMSNorm, q|k|v with biases, per-head q/k RMSNorm, rotate-half RoPE, causal GQA attention,
// SwiGLU) sharing no code with the engine, a test-only model variant assembled from the engine's ops in another order
// (each layer's MLP before its attention), and a harness that runs any backend's Decoder over the checkpoint against
// the reference.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "check.h"
#include "dtype.h"
#include "loader/config.h"
#include "loader/weights.h"
#include "models/decoder.h"
#include "models/dense_model.h"
#include "models/model.h"

namespace model_fixture {

using namespace vt;

// Shapes like the golden fixtures' (which every backend's kernels take): GQA 2:1, head_dim 16.
constexpr int32_t V = 96, H = 64, I = 96, L = 2, NH = 4, NKV = 2, HD = 16, QD = NH * HD, KVD = NKV * HD;
constexpr double kEps = 1e-6, kTheta = 10000.0;

// The test-only variant: each layer's MLP before its attention (pre-norm both), the same ops, no backend code.
class MlpFirstModel : public Model {
 public:
  MlpFirstModel(const Weights &w, ModelOps &ops) {
    x_ = ops.tensor({H}, Storage::kResidual), h_ = ops.tensor({H}, Storage::kOutput);
    qkv_ = ops.tensor({QD, KVD, KVD}), attn_ = ops.tensor({QD}), act_ = ops.tensor({I});
    attn_kind_ = ops.attention_kind({NH, NKV, HD, HD, false});
    embed_ = ops.linear_weights({&w.matrix(Role::kEmbed)});
    for (int32_t l = 0; l < w.n_layers(); ++l) {
      const auto m = [&](Role r) { return &w.matrix(r, l); };
      const auto v = [&](Role r) { return &w.vec(r, l); };
      layers_.push_back({ops.linear_weights({m(Role::kQ), m(Role::kK), m(Role::kV)},
                                            {v(Role::kQBias), v(Role::kKBias), v(Role::kVBias)}),
                         ops.linear_weights({m(Role::kO)}, {v(Role::kOBias)}),
                         ops.linear_weights({m(Role::kGate), m(Role::kUp)}, {v(Role::kGateBias), v(Role::kUpBias)}),
                         ops.linear_weights({m(Role::kDown)}, {v(Role::kDownBias)}),
                         ops.vector_weights(*v(Role::kAttnNorm)), ops.vector_weights(*v(Role::kQNorm)),
                         ops.vector_weights(*v(Role::kKNorm)), ops.vector_weights(*v(Role::kMlpNorm))});
    }
    final_norm_ = ops.vector_weights(w.vec(Role::kFinalNorm));
    head_ = ops.linear_weights({&w.matrix(Role::kLmHead)});
  }
  static std::unique_ptr<Model> make(const ModelConfig &, const Weights &w, ModelOps &ops) {
    return std::make_unique<MlpFirstModel>(w, ops);
  }
  void forward(ModelOps &ops) const override {
    ops.embed(embed_, x_);
    ops.rmsnorm(x_, layers_[0].mlp_norm, h_);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer &L = layers_[l];
      const bool last = l + 1 == layers_.size();
      ops.linear(h_, L.gate_up, act_, Epilogue::swiglu());
      ops.linear(act_, L.down, h_, Epilogue::add_norm(x_, L.attn_norm));
      ops.linear(h_, L.qkv, qkv_, Epilogue::rope_store(int32_t(l), attn_kind_, L.q_norm, L.k_norm));
      ops.attention(qkv_, attn_kind_, int32_t(l), attn_);
      ops.linear(attn_, L.o, h_, Epilogue::add_norm(x_, last ? final_norm_ : layers_[l + 1].mlp_norm, last));
    }
  }
  Tensor output() const override { return h_; }
  Linear head() const override { return head_; }

 private:
  struct Layer {
    Linear qkv, o, gate_up, down;
    Vector attn_norm, q_norm, k_norm, mlp_norm;
  };
  std::vector<Layer> layers_;
  Linear embed_{}, head_{};
  Vector final_norm_{};
  Tensor x_{}, h_{}, qkv_{}, attn_{}, act_{};
  Attention attn_kind_{};
};

// ---- the float64 reference -----------------------------------------------------------------------------------
using Vec = std::vector<double>;

inline Vec rmsnorm(const Vec &x, const std::vector<float> &w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + kEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

inline Vec linear(const Vec &x, const Matrix &m, const std::vector<float> &b) {
  Vec y(size_t(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    double s = b.empty() ? 0.0 : b[size_t(r)];
    for (int64_t c = 0; c < m.cols; ++c) s += double(load_as_f32(m.data, m.dtype, r * m.cols + c)) * x[size_t(c)];
    y[size_t(r)] = s;
  }
  return y;
}

// HF's rotate_half RoPE on each head of v (n heads of HD) at position pos.
inline void rope(Vec &v, int n, int pos) {
  for (int h = 0; h < n; ++h)
    for (int i = 0; i < HD / 2; ++i) {
      const double inv = 1.0 / double(std::pow(float(kTheta), float(2 * i) / float(HD)));  // transformers' fp32 base
      const double a = pos * inv, c = std::cos(a), s = std::sin(a);
      double &x1 = v[size_t(h * HD + i)], &x2 = v[size_t(h * HD + i + HD / 2)];
      const double a1 = x1, a2 = x2;
      x1 = a1 * c - a2 * s;
      x2 = a2 * c + a1 * s;
    }
}

inline void head_norm(Vec &v, int n, const std::vector<float> &w) {
  for (int h = 0; h < n; ++h) {
    Vec head(v.begin() + h * HD, v.begin() + (h + 1) * HD);
    head = rmsnorm(head, w);
    std::copy(head.begin(), head.end(), v.begin() + h * HD);
  }
}

struct RefState {  // per layer: the keys and values of every position so far
  std::vector<std::vector<Vec>> k, v;
};

inline Vec attention_sub(const Weights &w, int l, const Vec &h, int pos, RefState &st) {
  const auto m = [&](Role r) -> const Matrix & { return w.matrix(r, l); };
  const auto b = [&](Role r) -> const std::vector<float> & { return w.vec(r, l); };
  Vec q = linear(h, m(Role::kQ), b(Role::kQBias)), k = linear(h, m(Role::kK), b(Role::kKBias)),
      v = linear(h, m(Role::kV), b(Role::kVBias));
  head_norm(q, NH, b(Role::kQNorm)), head_norm(k, NKV, b(Role::kKNorm));
  rope(q, NH, pos), rope(k, NKV, pos);
  st.k[size_t(l)].push_back(k), st.v[size_t(l)].push_back(v);
  Vec out(QD, 0.0);
  for (int hh = 0; hh < NH; ++hh) {
    const int kv = hh / (NH / NKV);
    std::vector<double> score;
    double mx = -1e300;
    for (size_t p = 0; p < st.k[size_t(l)].size(); ++p) {
      double s = 0;
      for (int i = 0; i < HD; ++i) s += q[size_t(hh * HD + i)] * st.k[size_t(l)][p][size_t(kv * HD + i)];
      score.push_back(s / std::sqrt(double(HD)));
      mx = std::max(mx, score.back());
    }
    double z = 0;
    for (double &s : score) z += (s = std::exp(s - mx));
    for (size_t p = 0; p < score.size(); ++p)
      for (int i = 0; i < HD; ++i) out[size_t(hh * HD + i)] += score[p] / z * st.v[size_t(l)][p][size_t(kv * HD + i)];
  }
  return linear(out, m(Role::kO), b(Role::kOBias));
}

inline Vec mlp_sub(const Weights &w, int l, const Vec &h) {
  const Vec g = linear(h, w.matrix(Role::kGate, l), w.vec(Role::kGateBias, l)),
            u = linear(h, w.matrix(Role::kUp, l), w.vec(Role::kUpBias, l));
  Vec a(static_cast<size_t>(I));
  for (int i = 0; i < I; ++i) a[size_t(i)] = g[size_t(i)] / (1 + std::exp(-g[size_t(i)])) * u[size_t(i)];
  return linear(a, w.matrix(Role::kDown, l), w.vec(Role::kDownBias, l));
}

// Logits of one token at `pos`, the sequence's earlier positions in st; mlp_first: the variant's order.
inline Vec reference_step(const Weights &w, int token, int pos, RefState &st, bool mlp_first) {
  Vec x(static_cast<size_t>(H));
  const Matrix &embed = w.matrix(Role::kEmbed);
  for (int i = 0; i < H; ++i) x[size_t(i)] = load_as_f32(embed.data, embed.dtype, int64_t(token) * H + i);
  for (int l = 0; l < L; ++l) {
    for (int sub = 0; sub < 2; ++sub) {
      const bool attn = (sub == 0) != mlp_first;
      const Vec y = attn ? attention_sub(w, l, rmsnorm(x, w.vec(Role::kAttnNorm, l)), pos, st)
                         : mlp_sub(w, l, rmsnorm(x, w.vec(Role::kMlpNorm, l)));
      for (int i = 0; i < H; ++i) x[size_t(i)] += y[size_t(i)];
    }
  }
  return linear(rmsnorm(x, w.vec(Role::kFinalNorm)), w.matrix(Role::kLmHead), {});
}

inline ModelConfig config() {
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM", c.family = Family::Qwen3;
  c.vocab_size = V, c.hidden_size = H, c.intermediate_size = I, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NKV;
  c.head_dim = HD, c.max_position_embeddings = 64, c.rms_norm_eps = float(kEps), c.qk_norm = true, c.qkv_bias = true;
  c.rope.theta = kTheta;
  return c;
}

// ---- a random checkpoint ------------------------------------------------------------------------------------
// fp32 weights, or bf16 (the values rounded once, which the reference then reads as they are).
struct RandomCheckpoint {
  std::vector<std::vector<float>> store;
  std::vector<std::vector<uint16_t>> store16;
  Weights w;
  bool bf16 = false;
  Matrix matrix(int64_t rows, int64_t cols, double scale) {
    Matrix m;
    m.rows = rows, m.cols = cols;
    if (bf16) {
      store16.emplace_back(size_t(rows * cols));
      for (uint16_t &v : store16.back()) {
        const float f = float(uni(-scale, scale));
        uint32_t u;
        std::memcpy(&u, &f, 4);
        v = uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);  // round to nearest even
      }
      m.data = store16.back().data(), m.dtype = DType::BF16;
    } else {
      store.emplace_back(size_t(rows * cols));
      for (float &v : store.back()) v = float(uni(-scale, scale));
      m.data = store.back().data(), m.dtype = DType::F32;
    }
    return m;
  }
  static std::vector<float> vec(int64_t n, double lo, double hi) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = float(uni(lo, hi));
    return v;
  }
  explicit RandomCheckpoint(bool bf16_weights = false) : bf16(bf16_weights) {
    store.reserve(64), store16.reserve(64);
    // The dense schema of config() declares every tensor (o and MLP biases absent); filled in the order the
    // values were always drawn.
    w = Weights(dense_schema(config()));
    w.set(Role::kEmbed, -1, matrix(V, H, 1.0));
    for (int l = 0; l < L; ++l) {
      w.set(Role::kAttnNorm, l, vec(H, 0.5, 1.5)), w.set(Role::kMlpNorm, l, vec(H, 0.5, 1.5));
      w.set(Role::kQ, l, matrix(QD, H, 0.3)), w.set(Role::kK, l, matrix(KVD, H, 0.3));
      w.set(Role::kV, l, matrix(KVD, H, 0.3)), w.set(Role::kO, l, matrix(H, QD, 0.3));
      w.set(Role::kQBias, l, vec(QD, -0.1, 0.1)), w.set(Role::kKBias, l, vec(KVD, -0.1, 0.1));
      w.set(Role::kVBias, l, vec(KVD, -0.1, 0.1));
      w.set(Role::kQNorm, l, vec(HD, 0.5, 1.5)), w.set(Role::kKNorm, l, vec(HD, 0.5, 1.5));
      w.set(Role::kGate, l, matrix(I, H, 0.3)), w.set(Role::kUp, l, matrix(I, H, 0.3));
      w.set(Role::kDown, l, matrix(H, I, 0.3));
    }
    w.set(Role::kFinalNorm, -1, vec(H, 0.5, 1.5));
    w.set(Role::kLmHead, -1, matrix(V, H, 0.5));
    w.dtype = bf16 ? DType::BF16 : DType::F32;
    for (const auto &m : store) w.bytes += int64_t(m.size() * 4);
    for (const auto &m : store16) w.bytes += int64_t(m.size() * 2);
  }
};

// Runs a decoder built over ck (its KV cache: one block of 16 at block 0): a 6-token prompt in one step, then one
// decode step; the logits of every row of both steps against the reference's, as max |a - b| / max |b|. first_logits:
// the first step's logits.
inline double run_against_reference(Decoder &d, const RandomCheckpoint &ck, bool mlp_first,
                                    std::vector<float> *first_logits = nullptr) {
  const std::vector<int32_t> prompt = {3, 17, 42, 8, 8, 29};
  std::vector<int32_t> tokens = prompt;
  tokens.push_back(11);  // the decode step's token
  RefState st;
  st.k.resize(L), st.v.resize(L);
  double worst = 0;
  int32_t block_table[1] = {0};
  for (int step = 0; step < 2; ++step) {
    const int32_t p0 = step == 0 ? 0 : int32_t(prompt.size()), T = step == 0 ? int32_t(prompt.size()) : 1;
    std::vector<int32_t> pos(static_cast<size_t>(T)), slots(pos), rows(pos);
    for (int32_t t = 0; t < T; ++t) pos[size_t(t)] = slots[size_t(t)] = p0 + t, rows[size_t(t)] = t;
    const int32_t q_start[2] = {0, T}, pos0[1] = {p0};
    ForwardBatch b;
    b.n_tokens = T, b.tokens = tokens.data() + p0, b.positions = pos.data(), b.slots = slots.data();
    b.attn = cpu::AttentionBatch{1, q_start, pos0, block_table, 1, 16};
    d.forward(b);
    std::vector<float> logits(size_t(T) * V);
    d.project(rows.data(), T, logits.data());
    if (step == 0 && first_logits) *first_logits = logits;
    for (int32_t t = 0; t < T; ++t) {
      const Vec ref = reference_step(ck.w, tokens[size_t(p0 + t)], p0 + t, st, mlp_first);
      double scale = 0, err = 0;
      for (int i = 0; i < V; ++i) {
        scale = std::max(scale, std::fabs(ref[size_t(i)]));
        err = std::max(err, std::fabs(double(logits[size_t(t) * V + size_t(i)]) - ref[size_t(i)]));
      }
      worst = std::max(worst, err / scale);
    }
  }
  return worst;
}

inline double max_abs_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

}  // namespace model_fixture
