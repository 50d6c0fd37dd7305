#include "backend/cuda/cuda_decoder.h"

#include <cstdio>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "status.h"

namespace vt {

using cuda::CUdeviceptr;
using cuda::CUstream;

namespace {

// Gives back a tensor's pages of the checkpoint mapping once the tensor is on the device.
void release_mapping(const Checkpoint &ck, const void *data, size_t bytes) {
  const auto *p = static_cast<const uint8_t *>(data);
  for (const auto &f : ck.files())
    if (p >= f->data() && p + bytes <= f->data() + f->size()) {
      f->release(size_t(p - f->data()), bytes);
      return;
    }
}

}  // namespace

CudaDecoder::DMatrix CudaDecoder::upload(const Matrix &m, const Checkpoint &ck) { return upload_stacked({&m}, ck); }

CudaDecoder::DMatrix CudaDecoder::upload_stacked(std::initializer_list<const Matrix *> parts, const Checkpoint &ck) {
  const Matrix &first = **parts.begin();
  int64_t rows = 0, bytes = 0;
  for (const Matrix *m : parts) {
    if (m->dtype != first.dtype || m->cols != first.cols)
      fail(VT_ERR_UNSUPPORTED_DTYPE, "q/k/v (or gate/up) of one layer must share a dtype and an input width");
    rows += m->rows, bytes += m->bytes();
  }
  cuda::DeviceBuffer buf{size_t(bytes)};
  size_t off = 0;
  for (const Matrix *m : parts) {
    if (stager_)
      stager_->copy(buf.ptr() + CUdeviceptr(off), m->data, size_t(m->bytes()));
    else
      buf.upload(stream_->get(), m->data, size_t(m->bytes()), off);
    release_mapping(ck, m->data, size_t(m->bytes()));  // (the bytes are on the device or in a staging slot)
    off += size_t(m->bytes());
  }
  weight_bytes_ += bytes;
  DMatrix d{buf.ptr(), first.dtype, rows, first.cols};
  buffers_.push_back(std::move(buf));
  return d;
}

CUdeviceptr CudaDecoder::upload(const std::vector<float> &v) { return upload_stacked({&v}); }

CUdeviceptr CudaDecoder::upload_stacked(std::initializer_list<const std::vector<float> *> parts) {
  std::vector<float> all;
  for (const auto *v : parts) all.insert(all.end(), v->begin(), v->end());
  if (all.empty()) return 0;
  const size_t bytes = all.size() * sizeof(float);
  cuda::DeviceBuffer buf(bytes);
  // Through the stager too while it runs: a synchronous upload here (it waits for the stream) would drain the
  // staged copies of the matrices at every layer's norm weights. copy() has read `all` when it returns.
  if (stager_)
    stager_->copy(buf.ptr(), all.data(), bytes);
  else
    buf.upload(stream_->get(), all.data(), bytes);
  weight_bytes_ += int64_t(bytes);
  const CUdeviceptr p = buf.ptr();
  buffers_.push_back(std::move(buf));
  return p;
}

CUdeviceptr CudaDecoder::scratch(size_t elems, size_t elem_size) {
  const size_t bytes = std::max<size_t>(elems * elem_size, 16);
  cuda::DeviceBuffer buf(bytes);
  workspace_bytes_ += int64_t(bytes);
  const CUdeviceptr p = buf.ptr();
  buffers_.push_back(std::move(buf));
  return p;
}

BackendReport CudaDecoder::report() const {
  BackendReport r;
  // From the driver now, not from load: other processes (and our own growth) change what is free.
  const cuda::Context::MemInfo m = ctx_->mem_info();
  r.device = ctx_->ordinal();
  r.total_bytes = m.total_bytes >= 0 ? m.total_bytes : ctx_->total_bytes();
  r.free_bytes = m.free_bytes;
  r.unified_memory = ctx_->integrated();
  r.name = ctx_->name();
  r.graphs = graph_count();
  r.graph_bytes = graph_bytes();
  return r;
}

bool CudaDecoder::processors_on_device(const ModelConfig &c, const CudaTuning &t) {
  return t.penalties_on_device && t.sample_on_device && c.vocab_size <= cuda::Ops::kSampleMaxVocab;
}

CudaDecoder::Workspace CudaDecoder::plan_workspace(const ModelConfig &c, const CudaDecoderParams &p, int sm_count,
                                                   bool with_blas) {
  Workspace ws;
  const bool sub_f32 = p.tuning.sublayer_f32 && p.act == cuda::Act::BF16;
  const int64_t as = int64_t(cuda::act_size(p.act)), ps = sub_f32 ? 4 : as;
  const int64_t T = p.max_tokens, H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim, QKV = QD + 2 * KVD;
  const int64_t R = std::max(p.max_logit_rows, 1), S = std::max(p.max_seqs, 1);
  ws.table_width = (std::max(p.max_context, 1) + p.block_size - 1) / p.block_size;
  // Split-K decode attention serves steps of up to max_seqs rows (every decode step); its partials are sized
  // for that many rows at the longest context, and the split count (so their size) depends on the rows: the
  // largest need of any step.
  ws.attn_rows = int32_t(std::min<int64_t>(S, T));
  for (int32_t t = 1; t <= ws.attn_rows; ++t)
    ws.attn_bytes = std::max<int64_t>(ws.attn_bytes, int64_t(cuda::Ops::attention_workspace_bytes(
                                                         sm_count, t, c.n_heads, c.n_kv_heads, c.head_dim,
                                                         std::max(p.max_context, 1))));
  // The step's integers (meta_layout) at their largest: T rows, S sequences, 4 (T + S) prefill tiles.
  ws.meta_elems = meta_layout(size_t(R), size_t(T), size_t(S), size_t(ws.table_width)).tiles + size_t(4 * (T + S));
  // Every buffer the constructor allocates (scratch() and the rest): the fp32 residual stream, the final normed
  // rows (fp32, apart from normed_ with bf16 activations) and the gathered lm_head rows; q|k|v, attention
  // output, gate|up and the SwiGLU product; logits, greedy ids and logprobs; attention partials; the step's
  // integers and the row list; the logits processors' staging (processors_on_device); cuBLASLt's workspace; the
  // fused norm's partial sums of squares.
  const bool processors = processors_on_device(c, p.tuning);
  ws.total = 4 * kNormSsRows * cuda::Ops::norm_parts(H) + (processors ? int64_t(kProcBytes) : 0) +
             as * T * (H + QKV + QD + I + 2 * I) + ps * T * H + 4 * T * H + (as == 2 ? 4 * T * H : 0) + 4 * R * H +
             as * R * H + R * V * 4 + 8 * R + ws.attn_bytes + int64_t(ws.meta_elems) * 4 + 4 * R +
             int64_t(sizeof(cuda::SampleRow)) * R + 8 * kMaxTopLogprobs * R +
             (with_blas ? int64_t(cuda::CublasLt::kWorkspaceBytes) : 0);
  // Page-locked host memory, as the constructor allocates it: the logits processors' staging, the step's
  // integers, the greedy ids and logprobs, the sampled rows' parameters and results, a chained sampled step's
  // parameters (two slots; counted whether or not the engine chains sampled steps).
  ws.pinned = (processors ? int64_t(kProcBytes) : 0) + int64_t(ws.meta_elems) * 4 + 8 * R +
              R * int64_t(kSampleStagingRowBytes) + 2 * R * int64_t(sizeof(cuda::SampleRow));
  return ws;
}

CudaDecoder::CudaDecoder(const ModelConfig &config, const Weights &w, const Checkpoint &ck, const CudaDecoderParams &p,
                         const Progress &progress)
    : c_(config), p_(p) {
  const CudaTuning &t = p.tuning;
  ctx_ = std::make_unique<cuda::Context>(0, t.pdl);
  stream_ = std::make_unique<cuda::Stream>();
  ops_ = std::make_unique<cuda::Ops>(*ctx_, p.act, t.ops);
  // Debugging: VT_CUDA_SUBLAYER_F32=1 also writes the o and down products' outputs in fp32 (bf16 activations).
  sub_f32_ = t.sublayer_f32 && p.act == cuda::Act::BF16;
  // Debugging: VT_CUDA_ATTN=simple (the first attention kernel everywhere) or noprefill (no tensor-core prefill
  // kernel); VT_CUDA_CUBLASLT=0 (own GEMM kernels only).
  attn_mode_ = t.attention;
  // Only where the fused kernel's blocks (head_dim / 16 a head) fit twice over in the SMs: on the H200 it gave 1.07x
  // on the Qwen3-0.6B shape at batch 1 (256 blocks, 132 SMs) and 0.991x on 8B (384 blocks), bench/RESULTS.md
  // session 8. (Why 8B loses is not established; each head's blocks are a cluster, scheduled together.)
  const int64_t rope_blocks = int64_t(c_.n_heads + 2 * c_.n_kv_heads) * c_.head_dim / 16;
  qkv_rope_ = ops_->has_gemv_norm_rope(c_.head_dim) && rope_blocks <= 2 * int64_t(ctx_->sm_count());
  skip_ = t.skip;  // timing only (experiments builds); tuning_from_env said so on stderr
  graphs_lazy_ = p.graph_first_use;
  replays_ = t.replays;
  step_advance_ = replays_ == 1;
  // Sampled rows are picked on the GPU; VT_CUDA_SAMPLE=0 sends their logits to the host sampler instead.
  sample_on_device_ = t.sample_on_device && c_.vocab_size <= cuda::Ops::kSampleMaxVocab;
  const bool penalties_on_device = processors_on_device(c_, t);
  if (p.act == cuda::Act::BF16 && t.cublaslt) {
    blas_ = std::make_unique<cuda::CublasLt>(*ctx_);
    if (!blas_->available()) blas_.reset();
  }

  const size_t as = cuda::act_size(p.act), ps = sub_f32_ ? 4 : as;
  const int64_t T = p.max_tokens, H = c_.hidden_size, I = c_.intermediate_size, V = c_.vocab_size;
  const int64_t QD = int64_t(c_.n_heads) * c_.head_dim, KVD = int64_t(c_.n_kv_heads) * c_.head_dim;
  const int64_t QKV = QD + 2 * KVD;
  const int64_t R = std::max(p.max_logit_rows, 1), S = std::max(p.max_seqs, 1);
  kv_layer_bytes_ = CUdeviceptr(int64_t(p.n_blocks) * p.block_size * KVD * int64_t(as));
  const int64_t kv_total = int64_t(kv_layer_bytes_) * 2 * c_.n_layers;
  const Workspace ws = plan_workspace(c_, p, ctx_->sm_count(), blas_ != nullptr);
  table_width_ = ws.table_width, attn_ws_rows_ = ws.attn_rows, attn_ws_bytes_ = size_t(ws.attn_bytes);
  meta_elems_ = ws.meta_elems;
  const int64_t attn_ws = ws.attn_bytes, work = ws.total;

  // Fail before uploading anything when it cannot fit, naming the options that change it.
  const int64_t needed = w.bytes + kv_total + work, free = ctx_->free_bytes();
  if (needed > free)
    fail(VT_ERR_OUT_OF_MEMORY, "this engine needs " + std::to_string(needed >> 20) + " MiB of GPU memory (weights " +
                                   std::to_string(w.bytes >> 20) + " MiB, KV cache " + std::to_string(kv_total >> 20) +
                                   " MiB, workspaces " + std::to_string(work >> 20) + " MiB) but " + ctx_->name() +
                                   " has " + std::to_string(free >> 20) +
                                   " MiB free; lower maxContext or kvCacheBytes (or maxBatchTokens)");

  // The weight matrices go through pinned staging slots (StagedUpload: several copy threads, the transfers
  // overlapped with them); the stager lives for the upload only, and is waited for before anything else runs.
  // Straight from the mapping when the 64 MiB of pinned host memory cannot be had (the load goes on, only slower).
  std::optional<cuda::StagedUpload> stager;
  try {
    stager_ = &stager.emplace(stream_->get());
  } catch (const Error &) {
    stager_ = nullptr;
  }
  embed_ = upload(w.embed, ck);
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerWeights &L = w.layers[l];
    DLayer d;
    d.attn_norm = upload(L.attn_norm);
    d.qkv = upload_stacked({&L.q, &L.k, &L.v}, ck);
    d.o = upload(L.o, ck);
    // Biases come all three or none (Qwen2); a checkpoint with only some gets zeros for the rest.
    if (!L.q_bias.empty() || !L.k_bias.empty() || !L.v_bias.empty()) {
      const std::vector<float> zq(size_t(QD), 0.f), zk(size_t(KVD), 0.f);
      d.qkv_bias = upload_stacked({L.q_bias.empty() ? &zq : &L.q_bias, L.k_bias.empty() ? &zk : &L.k_bias,
                                   L.v_bias.empty() ? &zk : &L.v_bias});
    }
    d.o_bias = upload(L.o_bias);
    d.q_norm = upload(L.q_norm), d.k_norm = upload(L.k_norm);
    d.mlp_norm = upload(L.mlp_norm);
    d.gate_up = upload_stacked({&L.gate, &L.up}, ck);
    d.down = upload(L.down, ck);
    if (!L.gate_bias.empty() || !L.up_bias.empty()) {
      const std::vector<float> zi(size_t(I), 0.f);
      d.gate_up_bias = upload_stacked({L.gate_bias.empty() ? &zi : &L.gate_bias, L.up_bias.empty() ? &zi : &L.up_bias});
    }
    d.down_bias = upload(L.down_bias);
    layers_.push_back(d);
    if (progress) progress("weights", l + 1, c_.n_layers);
  }
  // The fused norm path needs every layer's products on the GEMV (bf16 weights, no gate/up biases).
  for (const DLayer &L : layers_)
    for (const DMatrix *m : {&L.qkv, &L.o, &L.gate_up, &L.down})
      if (m->dtype != DType::BF16 || L.gate_up_bias) fused_norm_ = false;
  final_norm_ = upload(w.final_norm);
  lm_head_ = w.lm_head.data == w.embed.data ? embed_ : upload(w.lm_head, ck);
  // (bf16 activations only: with fp32 ones final_ is normed_, which the fused lm_head reads as it writes final_.)
  head_norm_ = ops_->has_gemv_norm_head() && p.act == cuda::Act::BF16 && lm_head_.dtype == DType::BF16;
  if (stager) stager->finish();
  stager_ = nullptr;
  std::vector<float> inv_freq;
  rope_tables(c_, &inv_freq, &rope_scale_);
  inv_freq_ = upload(inv_freq);

  // Zeroed, so the padding rows of a graph replay (which read block 0) compute on finite values.
  kv_ = cuda::DeviceBuffer(size_t(kv_total));
  cuda::check(cuda::driver().cuMemsetD8Async(kv_.ptr(), 0, kv_.bytes(), stream_->get()), "cuMemsetD8Async(kv)");
  residual_ = scratch(T * H, 4), normed_ = scratch(T * H, as), proj_ = scratch(T * H, ps);
  norm_ss_ = scratch(kNormSsRows * cuda::Ops::norm_parts(H), 4);
  final_ = p.act == cuda::Act::BF16 ? scratch(T * H, 4) : normed_;
  qkv_ = scratch(T * QKV, as), attn_ = scratch(T * QD, as);
  gate_up_ = scratch(T * 2 * I, as), act_ = scratch(T * I, as);
  last_ = scratch(R * H, 4), last_act_ = scratch(R * H, as);
  logits_ = scratch(R * V, sizeof(float));
  ids_ = scratch(R, 4), lps_ = scratch(R, 4);
  sample_rows_ = scratch(R, sizeof(cuda::SampleRow));
  top_ids_ = scratch(R * kMaxTopLogprobs, 4), top_lps_ = scratch(R * kMaxTopLogprobs, 4);
  attn_ws_ = scratch(size_t(attn_ws), 1);
  // Zeroed once: its tickets must start at zero (every attention_decode call leaves them so).
  cuda::check(cuda::driver().cuMemsetD8Async(attn_ws_, 0, std::max<size_t>(attn_ws_bytes_, 16), stream_->get()),
              "cuMemsetD8Async(attention workspace)");
  if (penalties_on_device) {  // counted in plan_workspace, so in Engine.estimate too
    proc_dev_ = scratch(kProcBytes, 1);
    proc_pinned_ = cuda::PinnedBuffer(kProcBytes);
  }
  meta_buf_ = cuda::DeviceBuffer(meta_elems_ * 4);
  workspace_bytes_ += int64_t(meta_buf_.bytes()) + (blas_ ? blas_->workspace_bytes() : 0);
  meta_pinned_ = cuda::PinnedBuffer(meta_elems_ * 4);
  staged_ = std::make_unique<cuda::Event>();
  for (auto &e : picked_) e = std::make_unique<cuda::Event>();
  // Two slots of R ids (chain_begin), or ids and logprobs; mapped when the captured step writes the picks there.
  out_pinned_ = cuda::PinnedBuffer(size_t(R) * 8, step_advance_);
  for (auto &v : begun_positions_) v.resize(size_t(R));
  sample_pinned_ = cuda::PinnedBuffer(size_t(R) * kSampleStagingRowBytes);
  // (allocated either way, as plan_workspace counts it: mapped, so chains_sampled(), only where it is used)
  chain_rows_pinned_ =
      cuda::PinnedBuffer(2 * size_t(R) * sizeof(cuda::SampleRow), /*mapped=*/step_advance_ && sample_on_device_);
  pinned_bytes_ = int64_t(proc_pinned_.bytes() + meta_pinned_.bytes() + out_pinned_.bytes() + sample_pinned_.bytes() +
                          chain_rows_pinned_.bytes());
  set_meta(int32_t(T), int32_t(S));
  std::vector<int32_t> iota(static_cast<size_t>(R));
  for (int32_t i = 0; i < int32_t(R); ++i) iota[size_t(i)] = i;
  iota_ = cuda::DeviceBuffer(iota.size() * 4);
  iota_.upload(stream_->get(), iota.data(), iota.size() * 4);
  workspace_bytes_ += int64_t(iota_.bytes());
  stream_->synchronize();  // (all of the load's work is on this stream; a context-wide wait would break the
                           // graph capture of another engine loading or decoding in the process)
  if (!p.graph_buckets.empty()) {
    if (progress && !graphs_lazy_) progress("cuda graphs", 0, 1);
    capture_graphs();
    if (progress && !graphs_lazy_) progress("cuda graphs", 1, 1);
  }
}

CudaDecoder::~CudaDecoder() {
  // The buffers are freed by the members' destructors, on whatever thread destroys the engine; first the step still
  // in flight (an overlapped decode step, and its copy into out_pinned_) runs out.
  try {
    ctx_->make_current();
    cuda::synchronize(stream_->get());
  } catch (...) {
  }
}

void CudaDecoder::linear(CUdeviceptr x, int32_t T, const DMatrix &m, CUdeviceptr bias, CUdeviceptr y, bool y_f32,
                         bool x_f32) {
  const CUstream s = stream_->get();
  if (m.dtype == DType::BF16 && T <= gemv_rows_max())
    ops_->gemv(s, x, T, m.cols, m.ptr, m.rows, bias, y, y_f32, x_f32);
  else if (blas_ && m.dtype == DType::BF16 && !bias && !x_f32)
    blas_->matmul(s, x, T, m.cols, m.ptr, m.rows, y, y_f32);
  else
    ops_->gemm(s, x, T, m.cols, m.ptr, m.dtype, m.rows, bias, y, y_f32, x_f32);
}

bool CudaDecoder::fused_step(int32_t T) const {
  return fused_norm_ && ops_->fused_gemv_available() && T <= std::min<int64_t>(gemv_rows_max(), kNormSsRows);
}

void CudaDecoder::layers(int32_t T, int32_t n_seqs, int32_t max_keys, bool multi_row, int32_t n_tiles) {
  const CUstream s = stream_->get();
  const int64_t H = c_.hidden_size, I = c_.intermediate_size;
  const int64_t QD = int64_t(c_.n_heads) * c_.head_dim, KVD = int64_t(c_.n_kv_heads) * c_.head_dim, QKV = QD + 2 * KVD;
  const size_t as = cuda::act_size(p_.act);
  const float eps = c_.rms_norm_eps, scale = 1.0f / std::sqrt(float(c_.head_dim));
  const cuda::DeviceAttentionBatch da{n_seqs, meta_.q_start, meta_.pos0, meta_.tables, table_width_, p_.block_size};
  // Which attention kernel: split-K decode attention for steps of up to attn_ws_rows_ rows (every decode
  // step); the tensor-core prefill kernel for longer bf16 steps; the first, simple kernel otherwise.
  enum { kDecode, kPrefill, kSimple } attn = kSimple;
  // (Split-K takes GQA groups of up to 8 heads and head_dim up to 256; other shapes use the simple kernel.)
  const bool split_ok = c_.n_heads / c_.n_kv_heads <= 8 && c_.head_dim <= 256;
  if (attn_mode_ != "simple" && split_ok && T <= attn_ws_rows_) attn = kDecode;
  else if (attn_mode_.empty() && multi_row && n_tiles > 0) attn = kPrefill;

  // The residual stream is fp32 whatever the activation type (bf16: only the products' inputs, q/k/v and the
  // KV cache are rounded, as in production engines); the last layer's norm writes fp32 rows for the lm_head.
  // With the fused norm (fused_step), from the first o_proj on each product GEMV adds into the residual and
  // leaves the new rows' sums of squares in norm_ss_ and the rows times the next norm's weight in normed_, whose
  // product the next q|k|v or gate|up GEMV scales by 1 / rms.
  const bool fused = fused_step(T);
  // The first norm too, in the gather (embed_norm leaves what gemv_residual leaves): layer 0's product is fused then.
  const bool fused_first = fused && ops_->has_embed_norm();
  if (fused_first) {
    ops_->embed_norm(s, embed_.ptr, embed_.dtype, H, meta_.tokens, T, residual_, layers_[0].attn_norm, normed_,
                     norm_ss_);
  } else {
    ops_->embed(s, embed_.ptr, embed_.dtype, H, meta_.tokens, T, residual_, /*out_f32=*/true);
    ops_->rmsnorm_res32(s, residual_, T, H, layers_[0].attn_norm, eps, normed_);
  }
  for (int l = 0; l < c_.n_layers; ++l) {
    const DLayer &L = layers_[l];
    const bool fused_in = fused && (l > 0 || fused_first);  // normed_ holds xw and norm_ss_ its partials
    // RoPE on q and k (after Qwen3's per-head norm when it has one), then k and v into the cache: in the q|k|v
    // product's epilogue (qkv_rope_), else a launch of its own. (Folding it into the decode attention instead measured
    // 0.94-0.95x on the Qwen3-0.6B shape: bench/RESULTS.md sessions 5 and 8.)
    const bool qkv_rope = fused_in && qkv_rope_ && !skips(kSkipRope);
    if (qkv_rope)
      ops_->gemv_norm_rope(s, normed_, norm_ss_, T, H, eps, L.qkv.ptr, L.qkv_bias, qkv_, c_.n_heads, c_.n_kv_heads,
                           c_.head_dim, meta_.positions, inv_freq_, rope_scale_, L.q_norm, L.k_norm, meta_.slots,
                           k_cache(l), v_cache(l));
    else if (fused_in)
      ops_->gemv_norm(s, normed_, norm_ss_, T, H, eps, L.qkv.ptr, L.qkv.rows, L.qkv_bias, qkv_);
    else if (!skips(kSkipQkv))
      linear(normed_, T, L.qkv, L.qkv_bias, qkv_);
    if (!qkv_rope && !skips(kSkipRope))
      ops_->rope_store(s, qkv_, T, c_.n_heads, c_.n_kv_heads, c_.head_dim, meta_.positions, inv_freq_, rope_scale_,
                       L.q_norm, L.k_norm, eps, meta_.slots, k_cache(l), v_cache(l));
    if (skips(kSkipAttn)) {
      // left out (VT_CUDA_SKIP, timing only)
    } else if (attn == kDecode)
      ops_->attention_decode(s, qkv_, QKV, k_cache(l), v_cache(l), da, T, c_.n_heads, c_.n_kv_heads, c_.head_dim,
                             scale, max_keys, attn_ws_, attn_ws_bytes_, attn_);
    else if (attn == kPrefill)
      ops_->attention_prefill(s, qkv_, QKV, k_cache(l), v_cache(l), da, T, c_.n_heads, c_.n_kv_heads, c_.head_dim,
                              scale, meta_.tiles, n_tiles, attn_);
    else
      ops_->attention(s, qkv_, k_cache(l), v_cache(l), da, T, c_.n_heads, c_.n_kv_heads, c_.head_dim, scale, attn_,
                      QKV);
    if (fused) {  // residual += o(attn); mlp(norm(residual)); residual += down(...): three launches
      const CUdeviceptr next_norm = l + 1 < c_.n_layers ? layers_[l + 1].attn_norm : final_norm_;
      ops_->gemv_residual(s, attn_, T, QD, L.o.ptr, H, L.o_bias, residual_, norm_ss_, L.mlp_norm, normed_, sub_f32_);
      ops_->gemv_swiglu_norm(s, normed_, norm_ss_, T, H, eps, L.gate_up.ptr, I, act_);
      ops_->gemv_residual(s, act_, T, I, L.down.ptr, H, L.down_bias, residual_, norm_ss_, next_norm, normed_,
                          sub_f32_);
      if (l + 1 == c_.n_layers && !head_norm_now_)  // (else in the lm_head: head())
        ops_->rmsnorm_res32(s, residual_, T, H, final_norm_, eps, final_, /*out_f32=*/true);
      continue;
    }
    if (!skips(kSkipO)) linear(attn_, T, L.o, L.o_bias, proj_, sub_f32_);
    // residual += attention output; normed = post_attention_layernorm(residual)
    if (!skips(kSkipNorm))
      ops_->add_rmsnorm_res32(s, residual_, proj_, sub_f32_, T, H, L.mlp_norm, eps, normed_, false);
    if (skips(kSkipMlp)) {
      // left out (VT_CUDA_SKIP, timing only)
    } else if (L.gate_up.dtype == DType::BF16 && T <= gemv_rows_max() && !L.gate_up_bias) {
      ops_->gemv_swiglu(s, normed_, T, H, L.gate_up.ptr, I, act_);
    } else {
      linear(normed_, T, L.gate_up, L.gate_up_bias, gate_up_);
      ops_->silu_mul(s, gate_up_, gate_up_ + CUdeviceptr(I * int64_t(as)), T, I, 2 * I, act_);
    }
    if (!skips(kSkipMlp)) linear(act_, T, L.down, L.down_bias, proj_, sub_f32_);
    // residual += mlp output; normed = next layer's input_layernorm, or the final norm (fp32, into final_)
    if (skips(kSkipNorm) && l + 1 < c_.n_layers) {
      // left out (VT_CUDA_SKIP, timing only; the final norm stays, the lm_head's input)
    } else if (l + 1 < c_.n_layers)
      ops_->add_rmsnorm_res32(s, residual_, proj_, sub_f32_, T, H, layers_[l + 1].attn_norm, eps, normed_, false);
    else
      ops_->add_rmsnorm_res32(s, residual_, proj_, sub_f32_, T, H, final_norm_, eps, final_, true);
  }
}

void CudaDecoder::head(CUdeviceptr rows, int32_t n, bool with_argmax, bool step) {
  const CUstream s = stream_->get();
  const int64_t H = c_.hidden_size, V = c_.vocab_size;
  // Gather the rows (the embedding kernel is a row gather). Up to gemv_rows_max() rows the GEMV reads the fp32
  // rows; more go through cuBLASLt in bf16 (the lm_head is most of a large batch's arithmetic).
  if (blas_ && n > gemv_rows_max() && lm_head_.dtype == DType::BF16) {
    ops_->embed(s, final_, DType::F32, H, rows, n, last_act_, /*out_f32=*/false);
    blas_->matmul(s, last_act_, n, H, lm_head_.ptr, V, logits_, /*y_f32=*/true);
  } else if (step && head_norm_now_) {  // the final norm here, from the last down_proj's xw and partials
    ops_->gemv_norm_head(s, normed_, norm_ss_, H, c_.rms_norm_eps, lm_head_.ptr, V, logits_, residual_, final_norm_,
                         final_);
  } else if (step) {  // rows 0 .. n - 1: the gather would copy final_ as it is
    linear(final_, n, lm_head_, 0, logits_, /*y_f32=*/true, /*x_f32=*/true);
  } else {
    ops_->embed(s, final_, DType::F32, H, rows, n, last_, /*out_f32=*/true);
    linear(last_, n, lm_head_, 0, logits_, /*y_f32=*/true, /*x_f32=*/true);
  }
  // A captured step also leaves its picks as the tokens of a chained next step, and with step_advance_ the picks in
  // host memory and the metadata one token on (stage() then uploads nothing, or all but the tokens).
  if (with_argmax && !skips(kSkipArgmax)) {
    const cuda::StepAdvance adv = advance_args(/*moved=*/false);
    ops_->argmax(s, logits_, n, V, V, ids_, lps_, step ? meta_.tokens : 0, step && step_advance_ ? &adv : nullptr);
  }
}

void CudaDecoder::record_step(int32_t B, int32_t max_keys) {
  set_meta(B, B);  // where stage(b, B) puts a decode step of that bucket
  head_norm_now_ = head_norm_ && B == 1 && fused_step(B);
  struct Reset {
    bool &flag;
    ~Reset() { flag = false; }
  } reset{head_norm_now_};  // also when a launch throws
  layers(B, B, max_keys, false, 0);
  head(iota_.ptr(), B, true, /*step=*/true);
}

void CudaDecoder::capture_graphs() {
  // Buckets above what one step can hold are dropped (the scheduler never makes such a step).
  std::vector<int32_t> buckets;
  for (int32_t b : p_.graph_buckets)
    if (b >= 1 && b <= std::min({p_.max_seqs, p_.max_tokens, p_.max_logit_rows, attn_ws_rows_})) buckets.push_back(b);
  if (buckets.empty()) return;
  // The buckets whose attention takes another form at short contexts get a second graph for those steps.
  std::vector<int32_t> short_buckets;
  const int32_t short_keys = cuda::Ops::kClusterMaxKeys;
  for (int32_t b : buckets)
    if (!ops_->attention_cluster(b, c_.n_kv_heads, c_.head_dim, p_.max_context) &&
        ops_->attention_cluster(b, c_.n_kv_heads, c_.head_dim, short_keys))
      short_buckets.push_back(b);
  if (graphs_lazy_) {  // each captured by forward() when first needed
    graphs_.plan(buckets);
    if (!short_buckets.empty()) short_graphs_.plan(short_buckets);
    return;
  }
  const ForwardBatch none{};  // every row padding
  graphs_.build(
      *ctx_, stream_->get(), buckets, p_.graph_dedup, [&](int32_t B) { record_step(B, p_.max_context); },
      [&](int32_t B) { stage(none, B); });
  if (!short_buckets.empty())
    short_graphs_.build(
        *ctx_, stream_->get(), short_buckets, p_.graph_dedup, [&](int32_t B) { record_step(B, short_keys); },
        [&](int32_t B) { stage(none, B); });
}

void CudaDecoder::forward(const ForwardBatch &b) {
  ctx_->make_current();
  graph_rows_ = 0, head_rows_ = 0;
  const int32_t T = b.n_tokens;
  if (T <= 0) return;
  if (T > p_.max_tokens) fail(VT_ERR_INTERNAL, "CudaDecoder::forward: more rows than maxBatchTokens");
  const cpu::AttentionBatch &a = b.attn;
  const bool decode = T == a.n_seqs;
  int32_t max_keys = 1;  // of any row of the step
  for (int32_t s = 0; s < a.n_seqs; ++s)
    max_keys = std::max(max_keys, a.seq_pos0[s] + a.seq_q_start[s + 1] - a.seq_q_start[s]);
  if (const int32_t bucket = decode ? graphs_.bucket_for(T) : 0) {
    // A short step replays its bucket's short graph where there is one (the graphs are right for any lengths).
    const int32_t short_keys = cuda::Ops::kClusterMaxKeys;
    const bool short_step = max_keys <= short_keys && short_graphs_.bucket_for(T) == bucket;
    cuda::DecodeGraphs &g = short_step ? short_graphs_ : graphs_;
    const int32_t keys = short_step ? short_keys : p_.max_context;
    if (!g.has(bucket))  // capture 'first-use': this bucket's first step captures it
      g.add(*ctx_, stream_->get(), bucket, p_.graph_dedup, [&](int32_t B) { record_step(B, keys); });
    stage(b, bucket);
    for (int i = 0; i < replays_; ++i) g.launch(bucket, stream_->get());
    graph_rows_ = T, head_rows_ = T;
    return;
  }
  if (b.tokens_from_picks) fail(VT_ERR_INTERNAL, "CudaDecoder::forward: picks as tokens outside a captured step");
  int32_t n_tiles = 0;
  if (!decode && p_.act == cuda::Act::BF16 && attn_mode_.empty() && T > attn_ws_rows_ &&
      ops_->has_attention_prefill(c_.head_dim)) {
    n_tiles = cuda::Ops::prefill_tiles(a.seq_q_start, a.n_seqs, &tiles_, a.seq_pos0);
  }
  stage(b, T, n_tiles);
  layers(T, a.n_seqs, max_keys, !decode, n_tiles);
}

}  // namespace vt
