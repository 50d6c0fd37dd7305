#include "models/dense_decoder_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

CudaDecoder::DMatrix CudaDecoder::upload(const Matrix &m, const Checkpoint &ck) {
  cuda::DeviceBuffer buf(size_t(m.bytes()));
  buf.upload(stream_->get(), m.data, size_t(m.bytes()));
  release_mapping(ck, m.data, size_t(m.bytes()));
  weight_bytes_ += m.bytes();
  DMatrix d{buf.ptr(), m.dtype, m.rows, m.cols};
  buffers_.push_back(std::move(buf));
  return d;
}

CUdeviceptr CudaDecoder::upload(const std::vector<float> &v) {
  if (v.empty()) return 0;
  const size_t bytes = v.size() * sizeof(float);
  cuda::DeviceBuffer buf(bytes);
  buf.upload(stream_->get(), v.data(), bytes);
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

CudaDecoder::CudaDecoder(const ModelConfig &config, const Weights &w, const Checkpoint &ck, const CudaDecoderParams &p,
                         const std::function<void(int, int)> &progress)
    : c_(config), p_(p) {
  ctx_ = std::make_unique<cuda::Context>(0);
  stream_ = std::make_unique<cuda::Stream>();
  ops_ = std::make_unique<cuda::Ops>(*ctx_, p.act);
  // Debugging: VT_CUDA_SUBLAYER_F32=1 also writes the o and down products' outputs in fp32 (bf16 activations).
  if (const char *e = std::getenv("VT_CUDA_SUBLAYER_F32")) sub_f32_ = p.act == cuda::Act::BF16 && e[0] == '1';

  const size_t as = cuda::act_size(p.act), ps = sub_f32_ ? 4 : as;
  const int64_t T = p.max_tokens, H = c_.hidden_size, I = c_.intermediate_size, V = c_.vocab_size;
  const int64_t QD = int64_t(c_.n_heads) * c_.head_dim, KVD = int64_t(c_.n_kv_heads) * c_.head_dim;
  const int64_t R = std::max(p.max_logit_rows, 1);
  kv_layer_bytes_ = CUdeviceptr(int64_t(p.n_blocks) * p.block_size * KVD * int64_t(as));
  const int64_t kv_total = int64_t(kv_layer_bytes_) * 2 * c_.n_layers;
  // fp32: the residual stream, the final normed rows and the gathered lm_head rows; bf16 activations keep the
  // final normed rows apart from normed_ (the products' bf16 input).
  const int64_t work = int64_t(as) * T * (2 * H + 2 * QD + 2 * KVD + 2 * I) + int64_t(ps) * T * H + 4 * T * H +
                       (p.act == cuda::Act::BF16 ? 4 * T * H : 0) + 4 * R * H + R * V * 4;

  // Fail before uploading anything when it cannot fit, naming the options that change it.
  const int64_t needed = w.bytes + kv_total + work, free = ctx_->free_bytes();
  if (needed > free)
    fail(VT_ERR_OUT_OF_MEMORY, "this engine needs " + std::to_string(needed >> 20) + " MiB of GPU memory (weights " +
                                   std::to_string(w.bytes >> 20) + " MiB, KV cache " + std::to_string(kv_total >> 20) +
                                   " MiB, workspaces " + std::to_string(work >> 20) + " MiB) but " + ctx_->name() +
                                   " has " + std::to_string(free >> 20) +
                                   " MiB free; lower maxContext or kvCacheBytes (or maxBatchTokens)");

  embed_ = upload(w.embed, ck);
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerWeights &L = w.layers[l];
    DLayer d;
    d.attn_norm = upload(L.attn_norm);
    d.q = upload(L.q, ck), d.k = upload(L.k, ck), d.v = upload(L.v, ck), d.o = upload(L.o, ck);
    d.q_bias = upload(L.q_bias), d.k_bias = upload(L.k_bias), d.v_bias = upload(L.v_bias), d.o_bias = upload(L.o_bias);
    d.q_norm = upload(L.q_norm), d.k_norm = upload(L.k_norm);
    d.mlp_norm = upload(L.mlp_norm);
    d.gate = upload(L.gate, ck), d.up = upload(L.up, ck), d.down = upload(L.down, ck);
    d.gate_bias = upload(L.gate_bias), d.up_bias = upload(L.up_bias), d.down_bias = upload(L.down_bias);
    layers_.push_back(d);
    if (progress) progress(l + 1, c_.n_layers);
  }
  final_norm_ = upload(w.final_norm);
  lm_head_ = w.lm_head.data == w.embed.data ? embed_ : upload(w.lm_head, ck);
  std::vector<float> inv_freq;
  rope_tables(c_, &inv_freq, &rope_scale_);
  inv_freq_ = upload(inv_freq);

  kv_ = cuda::DeviceBuffer(size_t(kv_total));
  residual_ = scratch(T * H, 4), normed_ = scratch(T * H, as), proj_ = scratch(T * H, ps);
  final_ = p.act == cuda::Act::BF16 ? scratch(T * H, 4) : normed_;
  q_ = scratch(T * QD, as), attn_ = scratch(T * QD, as);
  k_ = scratch(T * KVD, as), v_ = scratch(T * KVD, as);
  gate_ = scratch(T * I, as), up_ = scratch(T * I, as);
  last_ = scratch(R * H, 4);
  logits_ = scratch(R * V, sizeof(float));
  rows_ = scratch(R, sizeof(int32_t));
  ctx_->synchronize();
}

CudaDecoder::~CudaDecoder() {
  // The buffers are freed by the members' destructors, on whatever thread destroys the engine.
  try {
    ctx_->make_current();
  } catch (...) {
  }
}

void CudaDecoder::linear(CUdeviceptr x, int32_t T, const DMatrix &m, CUdeviceptr bias, CUdeviceptr y, bool y_f32,
                         bool x_f32) {
  if (m.dtype == DType::BF16 && T <= 8)
    ops_->gemv(stream_->get(), x, T, m.cols, m.ptr, m.rows, bias, y, y_f32, x_f32);
  else
    ops_->gemm(stream_->get(), x, T, m.cols, m.ptr, m.dtype, m.rows, bias, y, y_f32, x_f32);
}

void CudaDecoder::forward(const ForwardBatch &b) {
  ctx_->make_current();
  const CUstream s = stream_->get();
  const int32_t T = b.n_tokens;
  if (T <= 0) return;
  if (T > p_.max_tokens) fail(VT_ERR_INTERNAL, "CudaDecoder::forward: more rows than maxBatchTokens");
  const cpu::AttentionBatch &a = b.attn;
  const int64_t H = c_.hidden_size, I = c_.intermediate_size;
  const float eps = c_.rms_norm_eps;

  // The batch's integers, one upload: tokens, positions, slots (T each), seq_q_start (n + 1), seq_pos0 (n),
  // block_tables (n, max_blocks).
  const int64_t n_tables = int64_t(a.n_seqs) * a.max_blocks_per_seq;
  meta_host_.clear();
  meta_host_.insert(meta_host_.end(), b.tokens, b.tokens + T);
  meta_host_.insert(meta_host_.end(), b.positions, b.positions + T);
  meta_host_.insert(meta_host_.end(), b.slots, b.slots + T);
  meta_host_.insert(meta_host_.end(), a.seq_q_start, a.seq_q_start + a.n_seqs + 1);
  meta_host_.insert(meta_host_.end(), a.seq_pos0, a.seq_pos0 + a.n_seqs);
  meta_host_.insert(meta_host_.end(), a.block_tables, a.block_tables + n_tables);
  const size_t meta_bytes = meta_host_.size() * sizeof(int32_t);
  if (meta_.bytes() < meta_bytes) meta_ = cuda::DeviceBuffer(std::max(meta_bytes * 2, size_t(4096)));
  meta_.upload(s, meta_host_.data(), meta_bytes);
  const CUdeviceptr tokens = meta_.ptr(), positions = tokens + 4 * T, slots = positions + 4 * T;
  const CUdeviceptr q_start = slots + 4 * T, pos0 = q_start + 4 * (a.n_seqs + 1), tables = pos0 + 4 * a.n_seqs;
  const cuda::DeviceAttentionBatch da{a.n_seqs, q_start, pos0, tables, a.max_blocks_per_seq, a.block_size};
  const float scale = 1.0f / std::sqrt(float(c_.head_dim));

  // The residual stream is fp32 whatever the activation type (bf16: only the products' inputs, q/k/v and the
  // KV cache are rounded, as in production engines); the last layer's norm writes fp32 rows for the lm_head.
  ops_->embed(s, embed_.ptr, embed_.dtype, H, tokens, T, residual_, /*out_f32=*/true);
  ops_->rmsnorm_res32(s, residual_, T, H, layers_[0].attn_norm, eps, normed_);
  for (int l = 0; l < c_.n_layers; ++l) {
    const DLayer &L = layers_[l];
    linear(normed_, T, L.q, L.q_bias, q_);
    linear(normed_, T, L.k, L.k_bias, k_);
    linear(normed_, T, L.v, L.v_bias, v_);
    // Qwen3's per-head q/k RMSNorm is fused into RoPE (L.q_norm / L.k_norm are 0 otherwise).
    ops_->rope(s, q_, T, c_.n_heads, c_.head_dim, 0, positions, inv_freq_, rope_scale_, L.q_norm, eps);
    ops_->rope(s, k_, T, c_.n_kv_heads, c_.head_dim, 0, positions, inv_freq_, rope_scale_, L.k_norm, eps);
    ops_->kv_store(s, k_, v_, T, c_.n_kv_heads, c_.head_dim, slots, k_cache(l), v_cache(l));
    ops_->attention(s, q_, k_cache(l), v_cache(l), da, T, c_.n_heads, c_.n_kv_heads, c_.head_dim, scale, attn_);
    linear(attn_, T, L.o, L.o_bias, proj_, sub_f32_);
    // residual += attention output; normed = post_attention_layernorm(residual)
    ops_->add_rmsnorm_res32(s, residual_, proj_, sub_f32_, T, H, L.mlp_norm, eps, normed_, false);
    linear(normed_, T, L.gate, L.gate_bias, gate_);
    linear(normed_, T, L.up, L.up_bias, up_);
    ops_->silu_mul(s, gate_, up_, T, I, 0, gate_);
    linear(gate_, T, L.down, L.down_bias, proj_, sub_f32_);
    // residual += mlp output; normed = next layer's input_layernorm, or the final norm (fp32, into final_)
    if (l + 1 < c_.n_layers)
      ops_->add_rmsnorm_res32(s, residual_, proj_, sub_f32_, T, H, layers_[l + 1].attn_norm, eps, normed_, false);
    else
      ops_->add_rmsnorm_res32(s, residual_, proj_, sub_f32_, T, H, final_norm_, eps, final_, true);
  }
}

void CudaDecoder::project(const int32_t *rows, int32_t n, float *logits) {
  if (n <= 0) return;
  ctx_->make_current();
  const CUstream s = stream_->get();
  const int64_t H = c_.hidden_size, V = c_.vocab_size;
  for (int32_t i0 = 0; i0 < n; i0 += p_.max_logit_rows) {
    const int32_t m = std::min(p_.max_logit_rows, n - i0);
    // Gather the rows (the embedding kernel is a row gather), project them, copy the logits back.
    cuda::check(cuda::driver().cuMemcpyHtoDAsync(rows_, rows + i0, size_t(m) * sizeof(int32_t), s),
                "cuMemcpyHtoDAsync(rows)");
    ops_->embed(s, final_, DType::F32, H, rows_, m, last_, /*out_f32=*/true);
    linear(last_, m, lm_head_, 0, logits_, /*y_f32=*/true, /*x_f32=*/true);
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(logits + int64_t(i0) * V, logits_, size_t(m * V) * sizeof(float), s),
                "cuMemcpyDtoHAsync(logits)");
    stream_->synchronize();
  }
}

}  // namespace vt
