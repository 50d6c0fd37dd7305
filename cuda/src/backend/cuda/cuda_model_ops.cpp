#include "backend/cuda/cuda_model_ops.h"

#include <algorithm>
#include <cmath>

#include "status.h"

namespace vt {

using cuda::CUdeviceptr;

namespace {

// Gives back a tensor's pages of the checkpoint mapping once the tensor is on the device (or in a staging slot).
void release_mapping(const Checkpoint &ck, const void *data, size_t bytes) {
  const auto *p = static_cast<const uint8_t *>(data);
  for (const auto &f : ck.files())
    if (p >= f->data() && p + bytes <= f->data() + f->size()) {
      f->release(size_t(p - f->data()), bytes);
      return;
    }
}

}  // namespace

CudaModelOps::CudaModelOps(const ModelConfig &c, const Params &p, int sm_count) : c_(c), p_(p), sizing_(true) {
  p_.gemv_rows = std::clamp<int32_t>(p.gemv_rows, 1, int32_t(kNormSsRows));
  as_ = cuda::act_size(p.act), ps_ = p.tuning.sublayer_f32 && p.act == cuda::Act::BF16 ? 4 : as_;
  // Split-K decode attention serves steps of up to attn_rows rows (every decode step); its partials are sized for
  // that many rows at the longest context, and the split count (so their size) depends on the rows: the largest
  // need of any step.
  for (int32_t t = 1; t <= p.attn_rows; ++t)
    attn_ws_bytes_ = std::max(attn_ws_bytes_, cuda::Ops::attention_workspace_bytes(sm_count, t, c.n_heads, c.n_kv_heads,
                                                                                   c.head_dim, std::max(p.max_context, 1)));
  attn_ws_ = alloc(attn_ws_bytes_);
  attn_tickets_bytes_ = cuda::Ops::attention_tickets_bytes(std::max(p.attn_rows, 1), c.n_kv_heads);
  attn_tickets_ = alloc(attn_tickets_bytes_);
}

CudaModelOps::CudaModelOps(const ModelConfig &c, const Params &p, cuda::Context &ctx, cuda::Ops &ops,
                           cuda::TensorGemm *gemm, cuda::CublasLt *blas, CUstream stream)
    : CudaModelOps(c, p, ctx.sm_count()) {
  // (the delegated constructor counted the attention partials; now allocate them for real)
  sizing_ = false, workspace_bytes_ = 0;
  ctx_ = &ctx, ops_ = &ops, gemm_ = gemm && gemm->available() ? gemm : nullptr, blas_ = blas, stream_ = stream;
  attn_ws_ = alloc(attn_ws_bytes_);
  attn_tickets_ = alloc(attn_tickets_bytes_);
  // Zeroed once: the tickets must start at zero (every attention_decode call leaves them so).
  cuda::check(cuda::driver().cuMemsetD8Async(attn_tickets_, 0, attn_tickets_bytes_, stream_),
              "cuMemsetD8Async(attention tickets)");
  // Only where the fused kernel's blocks (head_dim / 16 a head) fit twice over in the SMs: on the H200 it gave 1.07x
  // on the Qwen3-0.6B shape at batch 1 (256 blocks, 132 SMs) and 0.991x on 8B (384 blocks), bench/RESULTS.md
  // session 8. (Why 8B loses is not established; each head's blocks are a cluster, scheduled together.)
  const int64_t rope_blocks = int64_t(c.n_heads + 2 * c.n_kv_heads) * c.head_dim / 16;
  rope_fused_ = ops.has_gemv_norm_rope(c.head_dim) && rope_blocks <= 2 * int64_t(ctx.sm_count());
  std::vector<float> inv_freq;
  rope_tables(c, &inv_freq, &rope_scale_);
  inv_freq_ = upload_floats(inv_freq);
}

CUdeviceptr CudaModelOps::alloc(size_t bytes) {
  bytes = std::max<size_t>(bytes, 16);
  workspace_bytes_ += int64_t(bytes);
  if (sizing_) return 0;
  cuda::DeviceBuffer buf(bytes);
  const CUdeviceptr p = buf.ptr();
  buffers_.push_back(std::move(buf));
  return p;
}

CUdeviceptr CudaModelOps::upload_weights(const void *const *parts, const size_t *bytes, size_t n,
                                         const Matrix *const *release) {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bytes[i];
  weight_bytes_ += int64_t(total);
  if (sizing_ || total == 0) return 0;
  cuda::DeviceBuffer buf(total);
  size_t off = 0;
  cuda::StagedUpload *stager = upload_ ? upload_->stager : nullptr;
  for (size_t i = 0; i < n; ++i) {
    // Through the stager while it runs: a plain upload here (it waits for the stream) would drain the staged
    // copies. copy() has read the source when it returns, so its pages can go back at once.
    if (stager)
      stager->copy(buf.ptr() + CUdeviceptr(off), parts[i], bytes[i]);
    else
      buf.upload(stream_, parts[i], bytes[i], off);
    if (release && release[i] && upload_ && upload_->checkpoint)
      release_mapping(*upload_->checkpoint, parts[i], bytes[i]);
    off += bytes[i];
  }
  const CUdeviceptr p = buf.ptr();
  buffers_.push_back(std::move(buf));
  return p;
}

CUdeviceptr CudaModelOps::upload_floats(const std::vector<float> &v) {
  const void *data = v.data();
  const size_t bytes = v.size() * sizeof(float);
  return upload_weights(&data, &bytes, 1, nullptr);
}

Tensor CudaModelOps::tensor(std::initializer_list<int64_t> parts, Storage storage) {
  DTensor d;
  for (int64_t cols : parts) d.cols += cols;
  d.storage = storage;
  const int64_t T = p_.max_tokens;
  d.ptr = alloc(size_t(T * d.cols) * (storage == Storage::kResidual ? 4 : as_));
  if (storage == Storage::kResidual && d.cols > proj_cols_) {  // what a kAddNorm's product is added to
    proj_cols_ = d.cols;
    proj_ = alloc(size_t(T * d.cols) * ps_);
    norm_ss_ = alloc(size_t(kNormSsRows * cuda::Ops::norm_parts(d.cols)) * 4);
  }
  tensors_.push_back(d);
  const Tensor id = Tensor(int32_t(tensors_.size() - 1));
  if (storage == Storage::kOutput) {
    if (int32_t(output_) >= 0) fail(VT_ERR_INTERNAL, "CudaModelOps: a model declares one output tensor");
    output_ = id;
    final_ = as_ == 4 ? d.ptr : alloc(size_t(T * d.cols) * 4);
  }
  return id;
}

Linear CudaModelOps::linear_weights(std::initializer_list<const Matrix *> parts,
                                    std::initializer_list<const std::vector<float> *> biases) {
  const Matrix &first = **parts.begin();
  if (parts.size() == 1 && first.data && biases.size() == 0)  // a tied lm_head: the embedding's handle
    for (size_t i = 0; i < linears_.size(); ++i)
      if (linears_[i].source == first.data) return Linear(int32_t(i));
  DLinear d;
  std::vector<const void *> srcs;
  std::vector<size_t> sizes;
  std::vector<const Matrix *> mats;
  for (const Matrix *m : parts) {
    if (m->dtype != first.dtype || m->cols != first.cols)
      fail(VT_ERR_UNSUPPORTED_DTYPE, "the matrices of one linear layer (q/k/v, gate/up) must share a dtype and an input width");
    d.part_rows.push_back(m->rows);
    d.m.rows += m->rows;
    srcs.push_back(m->data), sizes.push_back(size_t(m->bytes())), mats.push_back(m);
  }
  d.m.dtype = first.dtype, d.m.cols = first.cols;
  d.source = parts.size() == 1 ? first.data : nullptr;
  d.m.ptr = upload_weights(srcs.data(), sizes.data(), srcs.size(), mats.data());
  // Biases stacked like the matrices; a layer with some parts' biases gets zeros for the others.
  bool any_bias = false;
  for (const std::vector<float> *b : biases) any_bias |= b && !b->empty();
  if (any_bias) {
    std::vector<float> all;
    size_t i = 0;
    for (const std::vector<float> *b : biases) {
      const size_t rows = size_t(d.part_rows.at(i++));
      if (b && !b->empty())
        all.insert(all.end(), b->begin(), b->end());
      else
        all.insert(all.end(), rows, 0.f);
    }
    for (; i < d.part_rows.size(); ++i) all.insert(all.end(), size_t(d.part_rows[i]), 0.f);
    d.m.bias = upload_floats(all);
  }
  // gate|up before SiLU·mul, where neither the fused GEMV nor the fused GEMM runs (8B, 8,192 rows: 403 MB)
  const bool fused = p_.fused_swiglu && d.m.dtype == DType::BF16 && !d.m.bias && d.m.cols % 8 == 0;
  if (parts.size() == 2 && !fused && d.m.rows > gate_up_cols_) {
    gate_up_cols_ = d.m.rows;
    gate_up_ = alloc(size_t(p_.max_tokens * gate_up_cols_) * as_);
  }
  linears_.push_back(std::move(d));
  if (upload_ && upload_->uploaded) upload_->uploaded(weight_bytes_);
  return Linear(int32_t(linears_.size() - 1));
}

Vector CudaModelOps::vector_weights(const std::vector<float> &v) {
  if (v.empty()) return kNoVector;
  vectors_.push_back(upload_floats(v));
  return Vector(int32_t(vectors_.size() - 1));
}

bool CudaModelOps::prefill_tiles_wanted(int32_t rows, bool multi_row) const {
  return multi_row && p_.act == cuda::Act::BF16 && p_.tuning.attention.empty() && rows > p_.attn_rows &&
         ops_->has_attention_prefill(c_.head_dim);
}

void CudaModelOps::begin_step(const Step &s) {
  if (sizing_) fail(VT_ERR_INTERNAL, "CudaModelOps: a sizing instance runs nothing");
  if (s.rows > p_.max_tokens) fail(VT_ERR_INTERNAL, "CudaModelOps: a step larger than max_tokens");
  s_ = s;
  fused_ = ops_->fused_gemv_available() && s.rows <= std::min<int64_t>(gemv_rows_max(), kNormSsRows);
  // Which attention kernel: split-K decode attention for steps of up to attn_rows rows (every decode step;
  // GQA groups of up to 8 heads and head_dim up to 256); the tensor-core prefill kernel for longer bf16 steps
  // that staged their tiles; the first, simple kernel otherwise.
  const bool split_ok = c_.n_heads / c_.n_kv_heads <= 8 && c_.head_dim <= 256;
  const std::string &mode = p_.tuning.attention;  // VT_CUDA_ATTN (debugging): "simple" / "noprefill"
  attn_ = Attn::kSimple;
  if (mode != "simple" && split_ok && s.rows <= p_.attn_rows) attn_ = Attn::kDecode;
  else if (mode.empty() && s.multi_row && s.n_tiles > 0) attn_ = Attn::kPrefill;
  embed_deferred_ = false, lazy_ = Tensor(-1);
}

void CudaModelOps::embed(Linear table, Tensor out) {
  flush_embed();
  if (lazy_ == out) lazy_ = Tensor(-1);
  // Deferred: the first rmsnorm of out may take the gather into its own kernel (Ops::embed_norm).
  embed_deferred_ = true, embed_table_ = table, embed_out_ = out;
}

void CudaModelOps::flush_embed() {
  if (!embed_deferred_) return;
  embed_deferred_ = false;
  settle_lazy(embed_out_);
  const DMatrix &m = matrix(embed_table_);
  const DTensor &o = t(embed_out_);
  ops_->embed(stream_, m.ptr, m.dtype, m.cols, s_.tokens, s_.rows, o.ptr, /*out_f32=*/o.storage == Storage::kResidual);
}

void CudaModelOps::materialize(Tensor x) {
  if (lazy_ != x || int32_t(x) < 0) return;
  lazy_ = Tensor(-1);
  const DTensor &o = t(x);
  ops_->rmsnorm_res32(stream_, t(lazy_residual_).ptr, s_.rows, o.cols, vec(lazy_norm_), c_.rms_norm_eps, o.ptr);
}

void CudaModelOps::settle_lazy(Tensor out) {
  if (int32_t(lazy_) >= 0 && lazy_ != out) materialize(lazy_);
}

void CudaModelOps::rmsnorm(Tensor x, Vector norm, Tensor out) {
  const DTensor &X = t(x), &Y = t(out);
  const int32_t T = s_.rows;
  const float eps = c_.rms_norm_eps;
  if (embed_deferred_ && embed_out_ == x && X.storage == Storage::kResidual && fused_ && ops_->has_embed_norm() &&
      norm != kNoVector) {
    // The gather leaves what a fused kAddNorm leaves: x's rows, and out lazily normed.
    embed_deferred_ = false;
    settle_lazy(out);
    const DMatrix &m = matrix(embed_table_);
    ops_->embed_norm(stream_, m.ptr, m.dtype, m.cols, s_.tokens, T, X.ptr, vec(norm), Y.ptr, norm_ss_);
    lazy_ = out, lazy_residual_ = x, lazy_norm_ = norm;
    return;
  }
  flush_embed();
  materialize(x);
  if (lazy_ == out) lazy_ = Tensor(-1);
  if (X.storage == Storage::kResidual)
    ops_->rmsnorm_res32(stream_, X.ptr, T, X.cols, vec(norm), eps, Y.ptr);
  else
    ops_->rmsnorm(stream_, X.ptr, T, X.cols, vec(norm), eps, Y.ptr);
}

void CudaModelOps::product(CUdeviceptr x, int32_t rows, const DMatrix &m, CUdeviceptr y, bool y_f32, bool x_f32) {
  using Out = cuda::TensorGemm::Out;
  if (m.dtype == DType::BF16 && rows <= gemv_rows_max())
    ops_->gemv(stream_, x, rows, m.cols, m.ptr, m.rows, m.bias, y, y_f32, x_f32);
  else if (!x_f32 && gemm_takes(x, m))
    gemm_->run(stream_, x, rows, m.cols, m.ptr, m.rows, m.bias, y, y_f32 ? Out::kF32 : Out::kBf16);
  else if (blas_ && m.dtype == DType::BF16 && !m.bias && !x_f32)
    blas_->matmul(stream_, x, rows, m.cols, m.ptr, m.rows, y, y_f32);
  else
    ops_->gemm(stream_, x, rows, m.cols, m.ptr, m.dtype, m.rows, m.bias, y, y_f32, x_f32);
}

void CudaModelOps::linear(Tensor x, Linear wi, Tensor out, const Epilogue &e) {
  flush_embed();
  const DLinear &w = linears_.at(size_t(wi));
  const DMatrix &m = w.m;
  const DTensor &X = t(x), &Y = t(out);
  const int32_t T = s_.rows;
  const float eps = c_.rms_norm_eps;
  const bool gemv = m.dtype == DType::BF16 && T <= gemv_rows_max();
  const bool lazy_in = lazy_ == x && int32_t(x) >= 0;  // x awaits its norm, which a GEMV can take in
  if (e.kind != Epilogue::kAddNorm && lazy_ == out && out != x) lazy_ = Tensor(-1);
  switch (e.kind) {
    case Epilogue::kNone:
    case Epilogue::kRopeStore: {
      const bool rope = e.kind == Epilogue::kRopeStore;
      bool roped = false;
      if (lazy_in && gemv) {
        lazy_ = Tensor(-1);
        if (rope && rope_fused_ && !skips(kSkipRope)) {
          ops_->gemv_norm_rope(stream_, X.ptr, norm_ss_, T, X.cols, eps, m.ptr, m.bias, Y.ptr, c_.n_heads,
                               c_.n_kv_heads, c_.head_dim, s_.positions, inv_freq_, rope_scale_, vec(e.q_norm),
                               vec(e.k_norm), s_.slots, k_cache(e.layer), v_cache(e.layer));
          roped = true;
        } else {
          ops_->gemv_norm(stream_, X.ptr, norm_ss_, T, X.cols, eps, m.ptr, m.rows, m.bias, Y.ptr);
        }
      } else {
        materialize(x);
        if (!(rope && skips(kSkipQkv))) product(X.ptr, T, m, Y.ptr);
      }
      if (rope && !roped && !skips(kSkipRope))
        ops_->rope_store(stream_, Y.ptr, T, c_.n_heads, c_.n_kv_heads, c_.head_dim, s_.positions, inv_freq_,
                         rope_scale_, vec(e.q_norm), vec(e.k_norm), eps, s_.slots, k_cache(e.layer), v_cache(e.layer));
      return;
    }
    case Epilogue::kSwiGLU: {
      if (w.part_rows.size() != 2 || w.part_rows[0] != w.part_rows[1])
        fail(VT_ERR_INTERNAL, "CudaModelOps: SwiGLU needs a gate|up layer of two equal parts");
      const int64_t I = w.part_rows[0];
      if (lazy_in && m.dtype == DType::BF16 && !m.bias) {
        lazy_ = Tensor(-1);
        ops_->gemv_swiglu_norm(stream_, X.ptr, norm_ss_, T, X.cols, eps, m.ptr, I, Y.ptr);
        return;
      }
      materialize(x);
      if (skips(kSkipMlp)) return;
      if (gemv && !m.bias) {
        ops_->gemv_swiglu(stream_, X.ptr, T, X.cols, m.ptr, I, Y.ptr);
      } else if (!gemv && !m.bias && gemm_takes(X.ptr, m)) {
        gemm_->run(stream_, X.ptr, T, X.cols, m.ptr, m.rows, 0, Y.ptr, cuda::TensorGemm::Out::kSwiGLU);
      } else {
        if (!gate_up_) fail(VT_ERR_INTERNAL, "CudaModelOps: a SwiGLU product planned as fused had to be split");
        product(X.ptr, T, m, gate_up_);
        ops_->silu_mul(stream_, gate_up_, gate_up_ + CUdeviceptr(I * int64_t(as_)), T, I, 2 * I, Y.ptr);
      }
      return;
    }
    case Epilogue::kAddNorm: {
      const DTensor &R = t(e.residual);
      if (R.storage != Storage::kResidual || R.cols != m.rows || Y.cols != m.rows || e.norm == kNoVector)
        fail(VT_ERR_INTERNAL, "CudaModelOps: kAddNorm adds into an fp32 residual as wide as the product, and norms");
      materialize(x);
      settle_lazy(out);
      if (e.output && out != output_) fail(VT_ERR_INTERNAL, "CudaModelOps: an output kAddNorm writes the kOutput tensor");
      const bool sub_f32 = ps_ == 4 && as_ == 2;
      if (fused_ && m.dtype == DType::BF16) {
        // residual += x·wᵀ; out = the new rows times the norm's weight, their partial sums of squares in norm_ss_
        ops_->gemv_residual(stream_, X.ptr, T, X.cols, m.ptr, m.rows, m.bias, R.ptr, norm_ss_, vec(e.norm), Y.ptr,
                            sub_f32);
        lazy_ = out, lazy_residual_ = e.residual, lazy_norm_ = e.norm;
        if (e.output && !s_.fold_output_norm) {  // the output rows, normed, in fp32 (with fp32 activations: out)
          ops_->rmsnorm_res32(stream_, R.ptr, T, R.cols, vec(e.norm), eps, final_, /*out_f32=*/true);
          if (final_ == Y.ptr) lazy_ = Tensor(-1);
        }
        return;
      }
      if (lazy_ == out) lazy_ = Tensor(-1);
      if (!skips(kSkipO)) product(X.ptr, T, m, proj_, sub_f32);
      if (e.output)  // the output rows in fp32 (with fp32 activations final_ is out itself)
        ops_->add_rmsnorm_res32(stream_, R.ptr, proj_, sub_f32, T, R.cols, vec(e.norm), eps, final_, true);
      else if (!skips(kSkipNorm))
        ops_->add_rmsnorm_res32(stream_, R.ptr, proj_, sub_f32, T, R.cols, vec(e.norm), eps, Y.ptr, false);
      return;
    }
  }
}

Recurrent CudaModelOps::gdn_weights(const GdnWeights &) {
  fail(VT_ERR_UNSUPPORTED_ARCH, c_.architecture + " has Gated DeltaNet layers, which the CUDA backend does not run yet: "
                                "load it with device 'cpu'");
}

void CudaModelOps::gated_delta_net(Tensor, Recurrent, Tensor) {
  fail(VT_ERR_INTERNAL, "CudaModelOps: gated_delta_net without gdn_weights");
}

Attention CudaModelOps::attention_kind(const AttentionGeometry &g) {
  if (!(g == AttentionGeometry{c_.n_heads, c_.n_kv_heads, c_.head_dim, c_.head_dim, false}))
    fail(VT_ERR_UNSUPPORTED_ARCH, c_.architecture + "'s attention (" + std::to_string(g.rotary_dims) + " of " +
                                      std::to_string(g.head_dim) + " dims rotated" + (g.output_gate ? ", gated" : "") +
                                      ") is one the CUDA backend does not run yet: load it with device 'cpu'");
  return Attention(0);
}

void CudaModelOps::attention(Tensor qkv, Attention, int32_t layer, Tensor out) {
  flush_embed();
  materialize(qkv);
  if (lazy_ == out) lazy_ = Tensor(-1);
  if (skips(kSkipAttn)) return;  // (VT_CUDA_SKIP, timing only)
  const DTensor &Q = t(qkv), &O = t(out);
  const float scale = 1.0f / std::sqrt(float(c_.head_dim));
  const int32_t T = s_.rows;
  switch (attn_) {
    case Attn::kDecode:
      ops_->attention_decode(stream_, Q.ptr, Q.cols, k_cache(layer), v_cache(layer), s_.attn, T, c_.n_heads,
                             c_.n_kv_heads, c_.head_dim, scale, s_.max_keys, attn_tickets_, attn_ws_, attn_ws_bytes_,
                             O.ptr);
      return;
    case Attn::kPrefill:
      ops_->attention_prefill(stream_, Q.ptr, Q.cols, k_cache(layer), v_cache(layer), s_.attn, T, c_.n_heads,
                              c_.n_kv_heads, c_.head_dim, scale, s_.tiles, s_.n_tiles, O.ptr);
      return;
    case Attn::kSimple:
      ops_->attention(stream_, Q.ptr, k_cache(layer), v_cache(layer), s_.attn, T, c_.n_heads, c_.n_kv_heads,
                      c_.head_dim, scale, O.ptr, Q.cols);
      return;
  }
}

CudaModelOps::OutputRows CudaModelOps::output_rows(Tensor x) const {
  OutputRows r;
  r.f32 = final_, r.cols = t(x).cols;
  if (lazy_ == x && s_.fold_output_norm) {
    r.lazy = true, r.xw = t(x).ptr, r.norm_ss = norm_ss_, r.residual = t(lazy_residual_).ptr, r.norm = vec(lazy_norm_);
  }
  return r;
}

}  // namespace vt
