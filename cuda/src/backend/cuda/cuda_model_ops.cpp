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

CudaModelOps::CudaModelOps(const ModelConfig &c, const Params &p, int sm_count)
    : c_(c), p_(p), sm_count_(sm_count), sizing_(true) {
  p_.gemv_rows = std::clamp<int32_t>(p.gemv_rows, 1, int32_t(kNormSsRows));
  as_ = cuda::act_size(p.act), ps_ = p.tuning.sublayer_f32 && p.act == cuda::Act::BF16 ? 4 : as_;
  reserve_attention(c.n_heads, c.n_kv_heads, c.head_dim);  // (an attention kind of other heads may grow them)
}

CudaModelOps::CudaModelOps(const ModelConfig &c, const Params &p, cuda::Context &ctx, cuda::Ops &ops,
                           cuda::TensorGemm *gemm, cuda::CublasLt *blas, CUstream stream)
    : CudaModelOps(c, p, ctx.sm_count()) {
  // (the delegated constructor counted the attention partials; now allocate them for real)
  sizing_ = false, workspace_bytes_ = 0, attn_ws_bytes_ = 0, attn_tickets_bytes_ = 0;
  ctx_ = &ctx, ops_ = &ops, gemm_ = gemm && gemm->available() ? gemm : nullptr, blas_ = blas, stream_ = stream;
  reserve_attention(c.n_heads, c.n_kv_heads, c.head_dim);
  // Only where the fused kernel's blocks (head_dim / 16 a head) fit twice over in the SMs: on the H200 it gave 1.07x
  // on the Qwen3-0.6B shape at batch 1 (256 blocks, 132 SMs) and 0.991x on 8B (384 blocks), bench/RESULTS.md
  // session 8. (Why 8B loses is not established; each head's blocks are a cluster, scheduled together.)
  const int64_t rope_blocks = int64_t(c.n_heads + 2 * c.n_kv_heads) * c.head_dim / 16;
  rope_fused_ = ops.has_gemv_norm_rope(c.head_dim) && rope_blocks <= 2 * int64_t(ctx.sm_count());
}

void CudaModelOps::reserve_attention(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim) {
  // Split-K decode attention serves steps of up to attn_rows rows (every decode step); its partials are sized for
  // that many rows at the longest context, and the split count (so their size) depends on the rows: the largest
  // need of any step.
  size_t ws = 0;
  for (int32_t t = 1; t <= p_.attn_rows; ++t)
    ws = std::max(ws, cuda::Ops::attention_workspace_bytes(sm_count_, t, n_heads, n_kv_heads, head_dim,
                                                           std::max(p_.max_context, 1)));
  const bool first = attn_tickets_bytes_ == 0;  // (the constructor's call: allocates whatever the sizes)
  if (first || ws > attn_ws_bytes_) {
    attn_ws_bytes_ = std::max(ws, attn_ws_bytes_);
    attn_ws_ = alloc(attn_ws_bytes_);
  }
  const size_t tickets = cuda::Ops::attention_tickets_bytes(std::max(p_.attn_rows, 1), n_kv_heads);
  if (first || tickets > attn_tickets_bytes_) {
    attn_tickets_bytes_ = std::max(tickets, attn_tickets_bytes_);
    attn_tickets_ = alloc(attn_tickets_bytes_);
    // Zeroed once: the tickets must start at zero (every attention_decode call leaves them so).
    if (!sizing_)
      cuda::check(cuda::driver().cuMemsetD8Async(attn_tickets_, 0, attn_tickets_bytes_, stream_),
                  "cuMemsetD8Async(attention tickets)");
  }
}

void CudaModelOps::set_kv(CUdeviceptr kv, CUdeviceptr layer_bytes, const StateLayout &layout) {
  for (const AttnKind &k : kinds_)
    if (layout.n_paged() > 0 && (k.g.n_kv_heads != layout.n_kv_heads() || k.g.head_dim != layout.head_dim()))
      fail(VT_ERR_INTERNAL, "CudaModelOps: an attention kind's K/V rows are not the cache's");
  kv_ = kv, kv_layer_bytes_ = layer_bytes, layout_ = layout;
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
  // fp16 weights under bf16 activations: narrowed to bf16 on the device once, after their copy on the same stream
  // (what transformers does loading an fp16 checkpoint with dtype bf16), so the GEMV and our tensor-core GEMMs serve
  // them rather than the fp32 reference kernel; the embedding gather reads the same table as bf16.
  if (d.m.dtype == DType::F16 && p_.act == cuda::Act::BF16) {
    if (!sizing_ && d.m.ptr) ops_->f16_to_bf16(stream_, d.m.ptr, d.m.rows * d.m.cols);
    d.m.dtype = DType::BF16;  // (a sizing instance too: the workspaces it plans follow the dtype)
  }
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
  const bool kernel = std::any_of(kinds_.begin(), kinds_.end(),
                                  [&](const AttnKind &k) { return ops_->has_attention_prefill(k.g.head_dim); });
  return multi_row && p_.act == cuda::Act::BF16 && p_.tuning.attention.empty() && rows > p_.attn_rows && kernel;
}

void CudaModelOps::set_state_slots(CUdeviceptr slots, int64_t stride) {
  if (slots && stride < layout_.slot_elems())
    fail(VT_ERR_INTERNAL, "CudaModelOps: state slots closer together than a slot's values");
  state_slots_ = slots, slot_stride_ = stride;
}

void CudaModelOps::begin_step(const Step &s) {
  if (sizing_) fail(VT_ERR_INTERNAL, "CudaModelOps: a sizing instance runs nothing");
  if (s.rows > p_.max_tokens) fail(VT_ERR_INTERNAL, "CudaModelOps: a step larger than max_tokens");
  if (!gdns_.empty() && (!s.state_slots || !state_slots_))
    fail(VT_ERR_INTERNAL, "CudaModelOps: a step of a model with recurrent layers needs its state slots");
  s_ = s;
  fused_ = ops_->fused_gemv_available() && s.rows <= std::min<int64_t>(gemv_rows_max(), kNormSsRows);
  embed_deferred_ = false, lazy_ = Tensor(-1);
}

CudaModelOps::Attn CudaModelOps::attention_form(const AttentionGeometry &g) const {
  // Split-K decode attention for steps of up to attn_rows rows (every decode step; GQA groups of up to 8 heads and
  // head_dim up to 256); the tensor-core prefill kernel for longer bf16 steps that staged their tiles, where it
  // takes the kind's head_dim; the first, simple kernel otherwise.
  const bool split_ok = g.n_heads / g.n_kv_heads <= 8 && g.head_dim <= 256;
  const std::string &mode = p_.tuning.attention;  // VT_CUDA_ATTN (debugging): "simple" / "noprefill"
  if (mode != "simple" && split_ok && s_.rows <= p_.attn_rows) return Attn::kDecode;
  if (mode.empty() && s_.multi_row && s_.n_tiles > 0 && ops_->has_attention_prefill(g.head_dim)) return Attn::kPrefill;
  return Attn::kSimple;
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
      const AttnKind *kind = rope ? &kinds_.at(size_t(e.attention)) : nullptr;
      bool roped = false;
      if (lazy_in && gemv) {
        lazy_ = Tensor(-1);
        if (rope && kind->dense && rope_fused_ && !skips(kSkipRope)) {
          ops_->gemv_norm_rope(stream_, X.ptr, norm_ss_, T, X.cols, eps, m.ptr, m.bias, Y.ptr, c_.n_heads,
                               c_.n_kv_heads, c_.head_dim, s_.positions, kind->inv_freq, kind->rope_scale,
                               vec(e.q_norm), vec(e.k_norm), s_.slots, k_cache(e.layer), v_cache(e.layer));
          roped = true;
        } else {
          ops_->gemv_norm(stream_, X.ptr, norm_ss_, T, X.cols, eps, m.ptr, m.rows, m.bias, Y.ptr);
        }
      } else {
        materialize(x);
        if (!(rope && skips(kSkipQkv))) product(X.ptr, T, m, Y.ptr);
      }
      if (rope && !roped && !skips(kSkipRope)) {
        if (kind->dense)
          ops_->rope_store(stream_, Y.ptr, T, c_.n_heads, c_.n_kv_heads, c_.head_dim, s_.positions, kind->inv_freq,
                           kind->rope_scale, vec(e.q_norm), vec(e.k_norm), eps, s_.slots, k_cache(e.layer),
                           v_cache(e.layer));
        else
          rope_store_unfused(*kind, Y.ptr, Y.cols, e);
      }
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

Attention CudaModelOps::attention_kind(const AttentionGeometry &g) {
  for (size_t i = 0; i < kinds_.size(); ++i)
    if (kinds_[i].g == g) return Attention(int32_t(i));
  if (g.n_heads <= 0 || g.n_kv_heads <= 0 || g.n_heads % g.n_kv_heads != 0 || g.head_dim <= 0 || g.head_dim % 2 != 0 ||
      g.rotary_dims <= 0 || g.rotary_dims > g.head_dim || g.rotary_dims % 2 != 0)
    fail(VT_ERR_INTERNAL, "CudaModelOps: a bad attention geometry");
  if (g.head_dim > 256)  // (every attention kernel's limit)
    fail(VT_ERR_UNSUPPORTED_ARCH, c_.architecture + " has attention heads of " + std::to_string(g.head_dim) +
                                      " dims, which the CUDA backend does not run yet (its attention kernels take up "
                                      "to 256): load it with device 'cpu'");
  AttnKind k;
  k.g = g;
  k.dense = g == AttentionGeometry{c_.n_heads, c_.n_kv_heads, c_.head_dim, c_.head_dim, false};
  std::vector<float> inv_freq;  // over the kind's rotary dims (the dense kind: every dim of a head)
  rope_tables(c_, g.rotary_dims, &inv_freq, &k.rope_scale);
  k.inv_freq = upload_floats(inv_freq);
  reserve_attention(g.n_heads, g.n_kv_heads, g.head_dim);
  if (g.output_gate) {  // q heads side by side (then k|v), and the gates: what split_q_gate leaves
    const int64_t qd = int64_t(g.n_heads) * g.head_dim, cols = qd + 2 * int64_t(g.n_kv_heads) * g.head_dim;
    if (cols > gated_qkv_cols_) gated_qkv_cols_ = cols, gated_qkv_ = alloc(size_t(p_.max_tokens * cols) * as_);
    if (qd > gate_cols_) gate_cols_ = qd, gate_ = alloc(size_t(p_.max_tokens * qd) * as_);
  }
  kinds_.push_back(k);
  return Attention(int32_t(kinds_.size() - 1));
}

void CudaModelOps::rope_store_unfused(const AttnKind &k, CUdeviceptr y, int64_t y_cols, const Epilogue &e) {
  const AttentionGeometry &g = k.g;
  const int64_t qd = int64_t(g.n_heads) * g.head_dim, kvd = int64_t(g.n_kv_heads) * g.head_dim;
  if (y_cols != (g.output_gate ? 2 : 1) * qd + 2 * kvd)
    fail(VT_ERR_INTERNAL, "CudaModelOps: a kRopeStore output that is not its attention kind's q|k|v");
  const int32_t T = s_.rows;
  CUdeviceptr qkv = y;
  if (g.output_gate) {  // per head [q | gate] → q heads side by side before k|v (gated_qkv_), gates apart
    ops_->split_q_gate(stream_, y, T, g.n_heads, g.head_dim, 2 * kvd, gated_qkv_, gate_);
    qkv = gated_qkv_;
  }
  ops_->rope_store(stream_, qkv, T, g.n_heads, g.n_kv_heads, g.head_dim, s_.positions, k.inv_freq, k.rope_scale,
                   vec(e.q_norm), vec(e.k_norm), c_.rms_norm_eps, s_.slots, k_cache(e.layer), v_cache(e.layer),
                   g.rotary_dims);
}

void CudaModelOps::attention(Tensor qkv, Attention a, int32_t layer, Tensor out) {
  flush_embed();
  materialize(qkv);
  if (lazy_ == out) lazy_ = Tensor(-1);
  if (skips(kSkipAttn)) return;  // (VT_CUDA_SKIP, timing only)
  const AttentionGeometry &g = kinds_.at(size_t(a)).g;
  const DTensor &Q = t(qkv), &O = t(out);
  const int64_t qd = int64_t(g.n_heads) * g.head_dim;
  if (O.cols != qd) fail(VT_ERR_INTERNAL, "CudaModelOps: attention's output is not its kind's n_heads · head_dim");
  // A gated kind's q is where its kRopeStore left it: side by side before k|v in gated_qkv_.
  const CUdeviceptr q = g.output_gate ? gated_qkv_ : Q.ptr;
  const int64_t q_stride = g.output_gate ? qd + 2 * int64_t(g.n_kv_heads) * g.head_dim : Q.cols;
  const float scale = 1.0f / std::sqrt(float(g.head_dim));
  const int32_t T = s_.rows;
  switch (attention_form(g)) {
    case Attn::kDecode:
      ops_->attention_decode(stream_, q, q_stride, k_cache(layer), v_cache(layer), s_.attn, T, g.n_heads,
                             g.n_kv_heads, g.head_dim, scale, s_.max_keys, attn_tickets_, attn_ws_, attn_ws_bytes_,
                             O.ptr);
      break;
    case Attn::kPrefill:
      ops_->attention_prefill(stream_, q, q_stride, k_cache(layer), v_cache(layer), s_.attn, T, g.n_heads,
                              g.n_kv_heads, g.head_dim, scale, s_.tiles, s_.n_tiles, O.ptr);
      break;
    case Attn::kSimple:
      ops_->attention(stream_, q, k_cache(layer), v_cache(layer), s_.attn, T, g.n_heads, g.n_kv_heads, g.head_dim,
                      scale, O.ptr, q_stride);
      break;
  }
  if (g.output_gate) ops_->sigmoid_mul(stream_, O.ptr, gate_, int64_t(T) * qd);  // out *= sigmoid(gate)
}

Recurrent CudaModelOps::gdn_weights(const GdnWeights &w) {
  using cuda::GatedDeltaOps;
  const GdnGeometry &geo = w.geo;
  if (!w.conv || !w.a_log || !w.dt_bias || !w.norm)
    fail(VT_ERR_INTERNAL, "CudaModelOps: a Gated DeltaNet layer without its weights");
  if (geo.n_k_heads <= 0 || geo.n_v_heads <= 0 || geo.n_v_heads % geo.n_k_heads != 0 || geo.k_dim <= 0 ||
      geo.v_dim <= 0 || w.conv_kernel < 1)
    fail(VT_ERR_INTERNAL, "CudaModelOps: a bad Gated DeltaNet geometry");
  if (geo.k_dim > GatedDeltaOps::kMaxKeyDim || w.conv_kernel > GatedDeltaOps::kMaxConvWidth)
    fail(VT_ERR_UNSUPPORTED_ARCH, c_.architecture + " has Gated DeltaNet layers with key heads of " +
                                      std::to_string(geo.k_dim) + " dims and a conv of " +
                                      std::to_string(w.conv_kernel) + ", which the CUDA backend does not run yet "
                                      "(its kernels take up to 128 and 4): load it with device 'cpu'");
  const int64_t C = geo.qkv_dim();
  // (a sizing instance binds shapes only: its vectors are empty)
  if (!sizing_ && (int64_t(w.conv->size()) != C * w.conv_kernel || int64_t(w.a_log->size()) != geo.n_v_heads ||
                   int64_t(w.dt_bias->size()) != geo.n_v_heads || int64_t(w.norm->size()) != geo.v_dim))
    fail(VT_ERR_INTERNAL, "CudaModelOps: a Gated DeltaNet layer's weights do not match its geometry");
  DGdn d;
  d.geo = geo, d.conv_kernel = w.conv_kernel, d.layer = w.layer;
  d.conv = upload_floats(*w.conv), d.a_log = upload_floats(*w.a_log), d.dt_bias = upload_floats(*w.dt_bias);
  d.norm = upload_floats(*w.norm);
  const int64_t T = p_.max_tokens;
  if (C > conv_cols_) conv_cols_ = C, conv_out_ = alloc(size_t(T * C) * as_);
  if (geo.n_v_heads > gate_heads_) {
    gate_heads_ = geo.n_v_heads;
    beta_ = alloc(size_t(T * gate_heads_) * 4), g_ = alloc(size_t(T * gate_heads_) * 4);
  }
  if (!sizing_ && !gdn_ops_) gdn_ops_ = std::make_unique<GatedDeltaOps>(*ctx_, p_.act);
  gdns_.push_back(d);
  return Recurrent(int32_t(gdns_.size() - 1));
}

void CudaModelOps::gated_delta_net(Tensor in, Recurrent r, Tensor out) {
  flush_embed();
  materialize(in);
  if (lazy_ == out) lazy_ = Tensor(-1);
  const DGdn &w = gdns_.at(size_t(r));
  const GdnGeometry &geo = w.geo;
  const int64_t C = geo.qkv_dim(), VD = int64_t(geo.n_v_heads) * geo.v_dim, Hv = geo.n_v_heads;
  const DTensor &X = t(in), &O = t(out);
  if (X.cols != C + VD + 2 * Hv || O.cols != VD)
    fail(VT_ERR_INTERNAL, "CudaModelOps: gated_delta_net's input is not qkv | z | b | a of its layer, or its output");
  const LayerState &ls = layout_.layer(w.layer);
  if (ls.kind != LayerState::kSlot || ls.slot_elems != geo.slot_floats(w.conv_kernel))
    fail(VT_ERR_INTERNAL, "CudaModelOps: a Gated DeltaNet layer without its part of the state slots");
  const int32_t T = s_.rows;
  // The layer's part of slot 0: its conv state, then its recurrent state; slots are slot_stride_ floats apart.
  const int64_t stride = slot_stride_;
  const CUdeviceptr conv_state = state_slots_ + CUdeviceptr(ls.slot_offset) * 4;
  const CUdeviceptr state = conv_state + CUdeviceptr(geo.conv_state_floats(w.conv_kernel)) * 4;
  // Each sequence's rows, slot and first position (0: fresh) as the step staged them.
  const cuda::DeviceRecurrentBatch b{s_.n_seqs, s_.attn.seq_q_start, s_.state_slots, s_.attn.seq_pos0};
  const auto col = [&](int64_t c) { return X.ptr + CUdeviceptr(c * int64_t(as_)); };  // in's column c of row 0
  gdn_ops_->causal_conv1d_silu(stream_, X.ptr, b, T, C, w.conv_kernel, w.conv, conv_state, stride, conv_out_, X.cols);
  gdn_ops_->gdn_gates(stream_, col(C + VD), col(C + VD + Hv), T, geo.n_v_heads, w.a_log, w.dt_bias, beta_, g_, X.cols);
  gdn_ops_->gated_delta_rule(stream_, conv_out_, g_, beta_, b, geo, state, stride, O.ptr);
  gdn_ops_->gated_rmsnorm(stream_, O.ptr, col(C), int64_t(T) * Hv, geo.v_dim, w.norm, c_.rms_norm_eps, O.ptr, X.cols,
                          geo.n_v_heads);
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
