// CUDA backend ops: the functions of cpu_ops.h, on device memory, enqueued on a stream. Activations are bf16
// with fp32 arithmetic inside every kernel (the product default), or fp32 (a debugging mode whose results
// match the CPU backend to fp32 rounding). Weights: bf16 for the matrices; norm weights, biases and the RoPE
// inv_freq table fp32; the embedding table in its stored dtype. All pointers are device pointers (CUdeviceptr)
// and every buffer is contiguous, row-major, in the activation type unless said otherwise. Nothing here
// synchronizes: errors of a running kernel surface at the caller's next synchronizing call.
#pragma once

#include <cstdint>

#include "backend/cuda/context.h"
#include "dtype.h"

namespace vt::cuda {

enum class Act : uint8_t { F32, BF16 };
inline size_t act_size(Act a) { return a == Act::F32 ? 4 : 2; }
inline const char *act_name(Act a) { return a == Act::F32 ? "f32" : "bf16"; }

// cpu::AttentionBatch with the arrays in device memory.
struct DeviceAttentionBatch {
  int32_t n_seqs;
  CUdeviceptr seq_q_start;   // (n_seqs + 1) int32
  CUdeviceptr seq_pos0;      // (n_seqs) int32
  CUdeviceptr block_tables;  // (n_seqs, max_blocks_per_seq) int32
  int32_t max_blocks_per_seq;
  int32_t block_size;
};

class Ops {
 public:
  // Resolves every kernel for activation type `act` up front, so a missing one fails here, not mid-step.
  Ops(Context &ctx, Act act);

  Act act() const { return act_; }

  // out(T, dim) = table[ids[t]]; table (vocab, dim) in `dt`; ids int32. out fp32 when out_f32 (the residual
  // stream), else the activation type.
  void embed(CUstream s, CUdeviceptr table, DType dt, int64_t dim, CUdeviceptr ids, int64_t T, CUdeviceptr out,
             bool out_f32 = false);

  // out(rows, dim) = x / rms(x) * weight; out may be x.
  void rmsnorm(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps, CUdeviceptr out);

  // residual(rows, dim) += x; out = rmsnorm(residual) * weight.
  void add_rmsnorm(CUstream s, CUdeviceptr residual, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight,
                   float eps, CUdeviceptr out);

  // The fp32 residual stream (both activation types; with fp32 activations these are rmsnorm/add_rmsnorm):
  //   rmsnorm_res32:     out(rows, dim) = rmsnorm(x) * weight, x fp32, out in the activation type;
  //   add_rmsnorm_res32: residual(rows, dim) fp32 += x (fp32 when x_f32, else the activation type);
  //                      out = rmsnorm(residual) * weight, fp32 when out_f32 (the lm_head's input), else the
  //                      activation type (the next product's input).
  void rmsnorm_res32(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps,
                     CUdeviceptr out);
  void add_rmsnorm_res32(CUstream s, CUdeviceptr residual, CUdeviceptr x, bool x_f32, int64_t rows, int64_t dim,
                         CUdeviceptr weight, float eps, CUdeviceptr out, bool out_f32);

  // In place on x(T, n_heads, head_dim), rows row_stride elements apart (0: n_heads * head_dim). pos(T) int32,
  // inv_freq(head_dim / 2). With norm_weight(head_dim) != 0 each head is first RMS-normed (Qwen3's q/k norm).
  void rope(CUstream s, CUdeviceptr x, int64_t T, int32_t n_heads, int32_t head_dim, int64_t row_stride,
            CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr norm_weight = 0, float eps = 0.f);

  // out(T, F) = silu(gate) * up, gate/up rows ld elements apart (0: F); out may be gate only when ld == F.
  void silu_mul(CUstream s, CUdeviceptr gate, CUdeviceptr up, int64_t T, int64_t F, int64_t ld, CUdeviceptr out);

  // y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N) fp32), w bf16. y is fp32 when y_f32 (logits), else the activation
  // type; x is fp32 when x_f32 (the lm_head over fp32 normed rows; then y must be fp32), else the activation
  // type. Decode-shaped: reads w once per 8 rows of x.
  void gemv(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias,
            CUdeviceptr y, bool y_f32 = false, bool x_f32 = false);

  // y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N) fp32) for any shape, w in `wdt` (fp32, fp16 or bf16), fp32
  // accumulation; y fp32 when y_f32, else the activation type; x as for gemv. The tiled fallback for
  // prefill-shaped products and for weights gemv does not take (gemm.cuh).
  void gemm(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, DType wdt, int64_t N, CUdeviceptr bias,
            CUdeviceptr y, bool y_f32 = false, bool x_f32 = false);

  // k_cache/v_cache (n_blocks, block_size, n_kv_heads, head_dim)[slot[t]] = k, v (T, n_kv_heads, head_dim).
  void kv_store(CUstream s, CUdeviceptr k, CUdeviceptr v, int64_t T, int32_t n_kv_heads, int32_t head_dim,
                CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache);

  // Paged causal GQA attention, the contract of cpu::attention; T query rows in total. head_dim <= 256.
  void attention(CUstream s, CUdeviceptr q, CUdeviceptr k_cache, CUdeviceptr v_cache, const DeviceAttentionBatch &b,
                 int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, CUdeviceptr out);

 private:
  Context &ctx_;
  Act act_;
  CUfunction embed_[2][3];  // [out_f32][table DType]
  CUfunction rmsnorm_, add_rmsnorm_, rope_, silu_mul_, kv_store_;
  CUfunction rmsnorm_res32_, add_rmsnorm_res32_[2][2];  // [x_f32][out_f32]
  CUfunction gemv_[2][4];       // [y_f32][log2 M]
  CUfunction gemv_x32_[4];      // fp32 x and y, [log2 M]
  CUfunction gemm_[2][3];       // [y_f32][weight DType]
  CUfunction gemm_x32_[3];      // fp32 x and y, [weight DType]
  CUfunction attention_[2];     // head_dim <= 128, <= 256
};

}  // namespace vt::cuda
