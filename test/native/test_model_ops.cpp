// Models written over ModelOps (models/model_ops.h) run on a backend with no code of their own there: the dense
// model (models/dense_model.cpp) and a test-only variant assembled from the same ops in another order (each layer
// runs its MLP before its attention), each on the CPU backend's ops (backend/cpu/cpu_model_ops.cpp), against a
// reference written out here in float64 from the architecture's definition (HF's Llama / Qwen3 modeling: RMSNorm,
// q|k|v with biases, per-head q/k RMSNorm, rotate-half RoPE, causal GQA attention, SwiGLU), sharing no code with
// the engine. A random tiny checkpoint (fp32 weights), one sequence prefilled in one step, then decoded a step.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <filesystem>

#include "backend/cpu/cpu_decoder.h"
#include "backend/cpu/cpu_model_ops.h"
#include "check.h"
#include "loader/safetensors.h"
#include "memory_plan.h"
#include "models/dense_model.h"
#include "vt_engine.h"

using namespace vt;

namespace {

constexpr int32_t V = 50, H = 32, I = 48, L = 2, NH = 4, NKV = 2, HD = 8, QD = NH * HD, KVD = NKV * HD;
constexpr double kEps = 1e-6, kTheta = 10000.0;

// The test-only variant: each layer's MLP before its attention (pre-norm both), the same ops, no backend code.
class MlpFirstModel {
 public:
  MlpFirstModel(const Weights &w, ModelOps &ops) : w_(w) {
    x_ = ops.tensor({H}, true), h_ = ops.tensor({H}), qkv_ = ops.tensor({QD, KVD, KVD});
    attn_ = ops.tensor({QD}), act_ = ops.tensor({I});
    for (const LayerWeights &Lw : w.layers)
      layers_.push_back({ops.linear_weights({&Lw.q, &Lw.k, &Lw.v}, {&Lw.q_bias, &Lw.k_bias, &Lw.v_bias}),
                         ops.linear_weights({&Lw.o}, {&Lw.o_bias}),
                         ops.linear_weights({&Lw.gate, &Lw.up}, {&Lw.gate_bias, &Lw.up_bias}),
                         ops.linear_weights({&Lw.down}, {&Lw.down_bias}), ops.vector_weights(Lw.attn_norm),
                         ops.vector_weights(Lw.q_norm), ops.vector_weights(Lw.k_norm),
                         ops.vector_weights(Lw.mlp_norm)});
    final_norm_ = ops.vector_weights(w.final_norm);
  }
  void forward(ModelOps &ops) const {
    ops.embed(w_.embed, x_);
    ops.rmsnorm(x_, layers_[0].mlp_norm, h_);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer &L = layers_[l];
      const bool last = l + 1 == layers_.size();
      ops.linear(h_, L.gate_up, act_, Epilogue::swiglu());
      ops.linear(act_, L.down, h_, Epilogue::add_norm(x_, L.attn_norm));
      ops.linear(h_, L.qkv, qkv_, Epilogue::rope_store(int32_t(l), L.q_norm, L.k_norm));
      ops.attention(qkv_, int32_t(l), attn_);
      ops.linear(attn_, L.o, h_, Epilogue::add_norm(x_, last ? final_norm_ : layers_[l + 1].mlp_norm, last));
    }
  }
  Tensor output() const { return h_; }

 private:
  struct Layer {
    Linear qkv, o, gate_up, down;
    Vector attn_norm, q_norm, k_norm, mlp_norm;
  };
  const Weights &w_;
  std::vector<Layer> layers_;
  Vector final_norm_{};
  Tensor x_{}, h_{}, qkv_{}, attn_{}, act_{};
};

// ---- the float64 reference -----------------------------------------------------------------------------------
using Vec = std::vector<double>;

Vec to_d(const float *p, size_t n) { return Vec(p, p + n); }

Vec rmsnorm(const Vec &x, const std::vector<float> &w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + kEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

Vec linear(const Vec &x, const Matrix &m, const std::vector<float> &b) {
  const float *W = static_cast<const float *>(m.data);
  Vec y(size_t(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    double s = b.empty() ? 0.0 : b[size_t(r)];
    for (int64_t c = 0; c < m.cols; ++c) s += double(W[r * m.cols + c]) * x[size_t(c)];
    y[size_t(r)] = s;
  }
  return y;
}

// HF's rotate_half RoPE on each head of v (n heads of HD) at position pos.
void rope(Vec &v, int n, int pos) {
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

void head_norm(Vec &v, int n, const std::vector<float> &w) {
  for (int h = 0; h < n; ++h) {
    Vec head(v.begin() + h * HD, v.begin() + (h + 1) * HD);
    head = rmsnorm(head, w);
    std::copy(head.begin(), head.end(), v.begin() + h * HD);
  }
}

struct RefState {  // per layer: the keys and values of every position so far
  std::vector<std::vector<Vec>> k, v;
};

Vec attention_sub(const Weights &w, int l, const Vec &h, int pos, RefState &st) {
  const LayerWeights &Lw = w.layers[size_t(l)];
  Vec q = linear(h, Lw.q, Lw.q_bias), k = linear(h, Lw.k, Lw.k_bias), v = linear(h, Lw.v, Lw.v_bias);
  head_norm(q, NH, Lw.q_norm), head_norm(k, NKV, Lw.k_norm);
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
  return linear(out, Lw.o, Lw.o_bias);
}

Vec mlp_sub(const Weights &w, int l, const Vec &h) {
  const LayerWeights &Lw = w.layers[size_t(l)];
  const Vec g = linear(h, Lw.gate, Lw.gate_bias), u = linear(h, Lw.up, Lw.up_bias);
  Vec a(static_cast<size_t>(I));
  for (int i = 0; i < I; ++i) a[size_t(i)] = g[size_t(i)] / (1 + std::exp(-g[size_t(i)])) * u[size_t(i)];
  return linear(a, Lw.down, Lw.down_bias);
}

// Logits of one token at `pos`, the sequence's earlier positions in st; mlp_first: the variant's order.
Vec reference_step(const Weights &w, int token, int pos, RefState &st, bool mlp_first) {
  const float *E = static_cast<const float *>(w.embed.data);
  Vec x = to_d(E + int64_t(token) * H, H);
  for (int l = 0; l < L; ++l) {
    const LayerWeights &Lw = w.layers[size_t(l)];
    for (int sub = 0; sub < 2; ++sub) {
      const bool attn = (sub == 0) != mlp_first;
      const Vec y = attn ? attention_sub(w, l, rmsnorm(x, Lw.attn_norm), pos, st) : mlp_sub(w, l, rmsnorm(x, Lw.mlp_norm));
      for (int i = 0; i < H; ++i) x[size_t(i)] += y[size_t(i)];
    }
  }
  return linear(rmsnorm(x, w.final_norm), w.lm_head, {});
}

// ---- a random checkpoint ------------------------------------------------------------------------------------
struct RandomCheckpoint {
  std::vector<std::vector<float>> store;
  Weights w;
  Matrix matrix(int64_t rows, int64_t cols, double scale) {
    store.emplace_back(size_t(rows * cols));
    for (float &v : store.back()) v = float(uni(-scale, scale));
    Matrix m;
    m.data = store.back().data(), m.dtype = DType::F32, m.rows = rows, m.cols = cols;
    return m;
  }
  static std::vector<float> vec(int64_t n, double lo, double hi) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = float(uni(lo, hi));
    return v;
  }
  RandomCheckpoint() {
    store.reserve(64);
    w.embed = matrix(V, H, 1.0);
    for (int l = 0; l < L; ++l) {
      LayerWeights Lw;
      Lw.attn_norm = vec(H, 0.5, 1.5), Lw.mlp_norm = vec(H, 0.5, 1.5);
      Lw.q = matrix(QD, H, 0.3), Lw.k = matrix(KVD, H, 0.3), Lw.v = matrix(KVD, H, 0.3), Lw.o = matrix(H, QD, 0.3);
      Lw.q_bias = vec(QD, -0.1, 0.1), Lw.k_bias = vec(KVD, -0.1, 0.1), Lw.v_bias = vec(KVD, -0.1, 0.1);
      Lw.q_norm = vec(HD, 0.5, 1.5), Lw.k_norm = vec(HD, 0.5, 1.5);
      Lw.gate = matrix(I, H, 0.3), Lw.up = matrix(I, H, 0.3), Lw.down = matrix(H, I, 0.3);
      w.layers.push_back(Lw);
    }
    w.final_norm = vec(H, 0.5, 1.5);
    w.lm_head = matrix(V, H, 0.5);
  }
};

ModelConfig config() {
  ModelConfig c;
  c.vocab_size = V, c.hidden_size = H, c.intermediate_size = I, c.n_layers = L, c.n_heads = NH, c.n_kv_heads = NKV;
  c.head_dim = HD, c.max_position_embeddings = 64, c.rms_norm_eps = float(kEps), c.qk_norm = true, c.qkv_bias = true;
  c.rope.theta = kTheta;
  return c;
}

// Runs `Model` on the CPU ops: a 6-token prompt in one step, then one decode step; the logits of every row of both
// steps, against the reference's, as max |a - b| / max |b|.
template <class Model>
double run(const char *name, const RandomCheckpoint &ck, bool mlp_first, std::vector<float> *first_logits) {
  const ModelConfig c = config();
  cpu::ThreadPool pool(2);
  KvCache kv(L, 1, 16, NKV, HD);
  CpuModelOps ops(c, pool, kv, 8);
  Model model(ck.w, ops);
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
    ops.begin_step(b, b.tokens);
    model.forward(ops);
    std::vector<float> logits(size_t(T) * V);
    ops.logits(model.output(), rows.data(), T, ck.w.lm_head, logits.data());
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
  std::printf("%s: max |logit - float64 reference| / max |reference| = %.2e over 7 positions\n", name, worst);
  return worst;
}

struct Dense : DenseModel {
  Dense(const Weights &w, ModelOps &ops) : DenseModel(config_, w, ops) {}
  static const ModelConfig config_;
};
const ModelConfig Dense::config_ = config();

}  // namespace

// For every fixture checkpoint: the bytes the plan gives the CPU decoder's activations (a sizing CpuModelOps over
// the model's weight shapes, as Engine.estimate reads them) against the bytes the decoder allocated when built
// over the checkpoint's real weights.
void plan_against_allocation() {
  const std::string root = "test/fixtures";  // the tests run from the repository root
  int checked = 0;
  for (const auto &entry : std::filesystem::directory_iterator(root)) {
    const std::string dir = entry.path().string();
    if (!std::filesystem::exists(dir + "/config.json") || !std::filesystem::exists(dir + "/reference.json")) continue;
    const ModelConfig c = load_model_config(dir);
    vt_engine_params p = vt_engine_default_params();
    p.device = VT_DEVICE_CPU;
    const MemoryPlan plan = plan_memory(c, p);
    const auto ck = Checkpoint::open(dir);
    cpu::ThreadPool pool(1);
    KvCache kv(c.n_layers, 1, plan.block_size, c.n_kv_heads, c.head_dim);
    const CpuDecoder decoder(c, bind_weights(c, *ck, nullptr), pool, kv, plan.max_batch_tokens);
    record(plan.activation_bytes > 0 && decoder.activation_bytes() == plan.activation_bytes,
           entry.path().filename().string() + ": plan " + std::to_string(plan.activation_bytes) + " B, allocated " +
               std::to_string(decoder.activation_bytes()) + " B");
    ++checked;
  }
  std::printf("plan against allocation: %d fixtures\n", checked);
  CHECK(checked >= 5);
}

int main() {
  g_rng.seed(21);
  plan_against_allocation();
  const RandomCheckpoint ck;
  std::vector<float> dense_logits, variant_logits;
  // fp32 against float64 over 2 layers of 32: a few ulps of the logits' scale; 1e-4 leaves room and catches any
  // wrong op (a missing norm, a transposed weight, the wrong rope pairing are all above 1e-2 here).
  CHECK(run<Dense>("dense model (attention, then MLP)", ck, false, &dense_logits) < 1e-4);
  CHECK(run<MlpFirstModel>("variant (MLP, then attention)", ck, true, &variant_logits) < 1e-4);
  // The two orders are different models: the check above could not pass with the variant run in the dense order.
  double diff = 0;
  for (size_t i = 0; i < dense_logits.size(); ++i) diff = std::max(diff, double(std::fabs(dense_logits[i] - variant_logits[i])));
  std::printf("dense vs variant logits: max |difference| %.3f\n", diff);
  CHECK(diff > 0.1);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
