#include "backend/cpu/cpu_model_ops.h"

#include "backend/cpu/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vt {

CpuModelOps::CpuModelOps(const ModelConfig &c, cpu::ThreadPool &pool, KvCache &kv, int32_t max_tokens)
    : c_(c), pool_(&pool), kv_(&kv), max_tokens_(max_tokens) {
  reserve(gathered_, c.hidden_size);
}

CpuModelOps::CpuModelOps(const ModelConfig &c, int32_t max_tokens) : c_(c), max_tokens_(max_tokens) {
  reserve(gathered_, c.hidden_size);
}

void CpuModelOps::reserve(PageVector<float> &v, int64_t cols) {
  if (pool_) v.resize(size_t(max_tokens_) * size_t(cols));
}

int64_t CpuModelOps::bytes() const {
  // the scratch, and the rows gathered for logits()
  int64_t cols = proj_cols_ + up_cols_ + c_.hidden_size + conv_cols_ + 2 * gate_cols_ + 2 * gated_cols_;
  for (const auto &t : tensors_)
    for (const Part &p : t) cols += p.cols;
  return int64_t(max_tokens_) * cols * int64_t(sizeof(float));
}

int64_t CpuModelOps::allocated_bytes() const {
  size_t floats = proj_.size() + up_.size() + gathered_.size() + conv_out_.size() + beta_.size() + g_.size() +
                  q_.size() + gate_.size();
  for (const auto &t : tensors_)
    for (const Part &p : t) floats += p.data.size();
  return int64_t(floats * sizeof(float));
}

Tensor CpuModelOps::tensor(std::initializer_list<int64_t> parts, Storage storage /*every CPU tensor is fp32*/) {
  std::vector<Part> t;
  for (int64_t cols : parts) {
    t.push_back({cols, {}});
    reserve(t.back().data, cols);
  }
  if (storage == Storage::kResidual && *parts.begin() > proj_cols_) {  // what kAddNorm's product is added to
    proj_cols_ = *parts.begin();
    reserve(proj_, proj_cols_);
  }
  tensors_.push_back(std::move(t));
  return Tensor(int32_t(tensors_.size() - 1));
}

Linear CpuModelOps::linear_weights(std::initializer_list<const Matrix *> parts,
                                   std::initializer_list<const std::vector<float> *> biases) {
  LinearW w;
  w.parts.assign(parts.begin(), parts.end());
  for (const std::vector<float> *b : biases) w.biases.push_back(b && !b->empty() ? b->data() : nullptr);
  w.biases.resize(w.parts.size(), nullptr);
  if (w.parts.size() == 1 && w.parts[0]->data && biases.size() == 0)  // a tied lm_head: the embedding's handle
    for (size_t i = 0; i < linears_.size(); ++i)
      if (linears_[i].parts.size() == 1 && linears_[i].parts[0]->data == w.parts[0]->data) return Linear(int32_t(i));
  if (w.parts.size() == 2 && w.parts[1]->rows > up_cols_) {  // kSwiGLU's up
    up_cols_ = w.parts[1]->rows;
    reserve(up_, up_cols_);
  }
  linears_.push_back(std::move(w));
  return Linear(int32_t(linears_.size() - 1));
}

Vector CpuModelOps::vector_weights(const std::vector<float> &v) {
  if (v.empty()) return kNoVector;
  vectors_.push_back(&v);
  return Vector(int32_t(vectors_.size() - 1));
}

Attention CpuModelOps::attention_kind(const AttentionGeometry &g) {
  for (size_t i = 0; i < kinds_.size(); ++i)
    if (kinds_[i].g == g) return Attention(int32_t(i));
  if (g.n_heads <= 0 || g.n_kv_heads <= 0 || g.n_heads % g.n_kv_heads != 0 || g.head_dim <= 0 || g.rotary_dims <= 0 ||
      g.rotary_dims > g.head_dim || g.rotary_dims % 2 != 0)
    throw std::logic_error("CpuModelOps: a bad attention geometry");
  AttnKind k{g, {}, 1.f};
  rope_tables(c_, g.rotary_dims, &k.inv_freq, &k.rope_scale);
  if (g.output_gate && int64_t(g.n_heads) * g.head_dim > gated_cols_) {
    gated_cols_ = int64_t(g.n_heads) * g.head_dim;
    reserve(q_, gated_cols_), reserve(gate_, gated_cols_);
  }
  kinds_.push_back(std::move(k));
  return Attention(int32_t(kinds_.size() - 1));
}

float *CpuModelOps::part(Tensor t, size_t p) { return tensors_.at(size_t(t)).at(p).data.data(); }

void CpuModelOps::begin_step(const ForwardBatch &b, const int32_t *tokens) {
  if (!pool_) throw std::logic_error("CpuModelOps: a sizing instance runs nothing");
  if (b.n_tokens > max_tokens_) throw std::logic_error("CpuModelOps: a step larger than max_tokens");
  b_ = &b, tokens_ = tokens;
  if (!gdns_.empty()) {
    fresh_.resize(size_t(b.attn.n_seqs));
    for (int32_t s = 0; s < b.attn.n_seqs; ++s) fresh_[size_t(s)] = b.attn.seq_pos0[s] == 0;
  }
}

void CpuModelOps::embed(Linear t, Tensor out) {
  const Matrix &table = matrix(t);
  cpu::embed(table.data, table.dtype, table.cols, tokens_, b_->n_tokens, part(out, 0));
}

void CpuModelOps::rmsnorm(Tensor x, Vector norm, Tensor out) {
  const int64_t T = b_->n_tokens, H = tensors_.at(size_t(x)).at(0).cols;
  float *o = part(out, 0);
  if (o != part(x, 0)) std::copy_n(part(x, 0), T * H, o);
  cpu::rmsnorm(*pool_, o, T, H, vec(norm), c_.rms_norm_eps);
}

void CpuModelOps::product(const float *x, const LinearW &w, size_t p, float *y) {
  const Matrix &m = *w.parts[p];
  cpu::matmul(*pool_, x, b_->n_tokens, m.cols, m.data, m.dtype, m.rows, w.biases[p], y);
}

void CpuModelOps::linear(Tensor x, Linear wi, Tensor out, const Epilogue &e) {
  const LinearW &w = linears_.at(size_t(wi));
  const float *in = part(x, 0);
  const int64_t T = b_->n_tokens;
  switch (e.kind) {
    case Epilogue::kNone:
    case Epilogue::kRopeStore:
      for (size_t p = 0; p < w.parts.size(); ++p) product(in, w, p, part(out, p));
      if (e.kind == Epilogue::kRopeStore) {
        const AttnKind &K = kinds_.at(size_t(e.attention));
        const int32_t NH = K.g.n_heads, NKV = K.g.n_kv_heads, D = K.g.head_dim;
        float *q = part(out, 0), *k = part(out, 1), *v = part(out, 2);
        if (K.g.output_gate) {  // per head [q | gate] → q_, gate_ (the gate before any norm, as transformers)
          for (int64_t t = 0; t < T; ++t)
            for (int32_t h = 0; h < NH; ++h) {
              const float *src = q + (t * NH + h) * 2 * D;
              std::copy_n(src, D, q_.data() + (t * NH + h) * D);
              std::copy_n(src + D, D, gate_.data() + (t * NH + h) * D);
            }
          q = q_.data();
        }
        const float eps = c_.rms_norm_eps;
        if (e.q_norm != kNoVector) cpu::rmsnorm(*pool_, q, T * NH, D, vec(e.q_norm), eps);
        if (e.k_norm != kNoVector) cpu::rmsnorm(*pool_, k, T * NKV, D, vec(e.k_norm), eps);
        cpu::rope(*pool_, q, T, NH, D, b_->positions, K.inv_freq.data(), K.rope_scale, K.g.rotary_dims);
        cpu::rope(*pool_, k, T, NKV, D, b_->positions, K.inv_freq.data(), K.rope_scale, K.g.rotary_dims);
        cpu::kv_store(k, v, T, NKV, D, b_->slots, kv_->k(e.layer), kv_->v(e.layer));
      }
      return;
    case Epilogue::kSwiGLU: {
      float *gate = part(out, 0);
      product(in, w, 0, gate);
      product(in, w, 1, up_.data());
      cpu::silu_mul(*pool_, gate, up_.data(), T, w.parts[0]->rows, gate);
      return;
    }
    case Epilogue::kAddNorm:
      product(in, w, 0, proj_.data());
      cpu::add_rmsnorm(*pool_, part(e.residual, 0), proj_.data(), T, w.parts[0]->rows, vec(e.norm), c_.rms_norm_eps,
                       part(out, 0));
      return;
  }
}

void CpuModelOps::attention(Tensor qkv, Attention a, int32_t layer, Tensor out) {
  const AttentionGeometry &g = kinds_.at(size_t(a)).g;
  const float scale = 1.0f / std::sqrt(float(g.head_dim));
  float *o = part(out, 0);
  cpu::attention(*pool_, g.output_gate ? q_.data() : part(qkv, 0), kv_->k(layer), kv_->v(layer), b_->attn, g.n_heads,
                 g.n_kv_heads, g.head_dim, scale, o);
  if (g.output_gate) {  // out *= sigmoid(gate)
    const int64_t n = int64_t(b_->n_tokens) * g.n_heads * g.head_dim;
    const float *gate = gate_.data();
    pool_->run(n, 4096, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) o[i] *= 1.f / (1.f + std::exp(-gate[i]));
    });
  }
}

Recurrent CpuModelOps::gdn_weights(const GdnWeights &w) {
  const int64_t C = w.geo.qkv_dim();
  if (!w.conv || !w.a_log || !w.dt_bias || !w.norm)
    throw std::logic_error("CpuModelOps: a Gated DeltaNet layer without its weights");
  // (a sizing instance binds shapes only: its vectors are empty)
  if (pool_ && (int64_t(w.conv->size()) != C * w.conv_kernel || int64_t(w.a_log->size()) != w.geo.n_v_heads ||
                int64_t(w.dt_bias->size()) != w.geo.n_v_heads || int64_t(w.norm->size()) != w.geo.v_dim))
    throw std::logic_error("CpuModelOps: a Gated DeltaNet layer's weights do not match its geometry");
  if (C > conv_cols_) conv_cols_ = C, reserve(conv_out_, C);
  if (w.geo.n_v_heads > gate_cols_) gate_cols_ = w.geo.n_v_heads, reserve(beta_, gate_cols_), reserve(g_, gate_cols_);
  gdns_.push_back(w);
  return Recurrent(int32_t(gdns_.size() - 1));
}

void CpuModelOps::gated_delta_net(Tensor in, Recurrent r, Tensor out) {
  const GdnWeights &w = gdns_.at(size_t(r));
  const int64_t T = b_->n_tokens, C = w.geo.qkv_dim();
  const cpu::RecurrentBatch rb{b_->attn.n_seqs, b_->attn.seq_q_start, b_->state_slots, fresh_.data()};
  // The layer's part of slot 0; slots are kv_->slot_stride() floats apart (conv state first: gdn_geometry.h).
  float *conv_state = kv_->state(w.layer, 0), *state = conv_state + w.geo.conv_state_floats(w.conv_kernel);
  const int64_t stride = kv_->slot_stride();
  cpu::causal_conv1d_silu(*pool_, part(in, 0), rb, C, w.conv_kernel, w.conv->data(), conv_state, stride,
                          conv_out_.data());
  cpu::gdn_gates(part(in, 2), part(in, 3), T, w.geo.n_v_heads, w.a_log->data(), w.dt_bias->data(), beta_.data(),
                 g_.data());
  float *o = part(out, 0);
  cpu::gated_delta_rule(*pool_, conv_out_.data(), g_.data(), beta_.data(), rb, w.geo, state, stride, o);
  cpu::gated_rmsnorm(*pool_, o, part(in, 1), T * w.geo.n_v_heads, w.geo.v_dim, w.norm->data(), c_.rms_norm_eps, o);
}

void CpuModelOps::logits(Tensor x, const int32_t *rows, int32_t n, Linear h, float *out) {
  if (n <= 0) return;
  const Matrix &head = matrix(h);
  const int64_t H = head.cols;
  const float *src = part(x, 0);
  for (int32_t i = 0; i < n; ++i) std::copy_n(src + int64_t(rows[i]) * H, H, gathered_.data() + int64_t(i) * H);
  cpu::matmul(*pool_, gathered_.data(), n, H, head.data, head.dtype, head.rows, nullptr, out);
}

}  // namespace vt
