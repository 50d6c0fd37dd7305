// Host side of the CUDA ops: shape checks, launch geometry and the kernel names (entry points in the .cu
// files of this folder; the names encode the element types, e.g. vt_gemv_bf16_f32_m4).
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <climits>

#include "status.h"

namespace vt::cuda {

namespace {

const char *table_name(DType dt) { return dt == DType::F32 ? "f32" : dt == DType::F16 ? "f16" : "bf16"; }

unsigned blocks_for(int64_t n, int64_t per_block) { return unsigned((n + per_block - 1) / per_block); }

void require(bool ok, const char *what) {
  if (!ok) fail(VT_ERR_INTERNAL, std::string("CUDA op called with bad arguments: ") + what);
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

Ops::Ops(Context &ctx, Act act) : ctx_(ctx), act_(act) {
  const std::string a = act_name(act);
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    embed_[0][int(dt)] = ctx.function(std::string("vt_embed_") + table_name(dt) + "_to_" + a);
    embed_[1][int(dt)] = ctx.function(std::string("vt_embed_") + table_name(dt) + "_to_f32");
  }
  rmsnorm_ = ctx.function("vt_rmsnorm_" + a);
  add_rmsnorm_ = ctx.function("vt_add_rmsnorm_" + a);
  rmsnorm_res32_ = act == Act::F32 ? rmsnorm_ : ctx.function("vt_rmsnorm_f32_to_bf16");
  for (int xf = 0; xf < 2; ++xf)
    for (int of = 0; of < 2; ++of)
      add_rmsnorm_res32_[xf][of] =
          act == Act::F32 ? add_rmsnorm_
                          : ctx.function(std::string("vt_add_rmsnorm_res32_") + (xf ? "f32" : "bf16") + "_" +
                                         (of ? "f32" : "bf16"));
  rope_ = ctx.function("vt_rope_" + a);
  silu_mul_ = ctx.function("vt_silu_mul_" + a);
  kv_store_ = ctx.function("vt_kv_store_" + a);
  for (int yf = 0; yf < 2; ++yf)
    for (int lm = 0; lm < 4; ++lm) {
      // fp32 activations have only an fp32 output; bf16 ones give bf16 or fp32 (logits).
      const std::string y = act == Act::F32 || yf ? "f32" : "bf16";
      gemv_[yf][lm] = ctx.function("vt_gemv_" + a + "_" + y + "_m" + std::to_string(1 << lm));
    }
  for (int lm = 0; lm < 4; ++lm) gemv_x32_[lm] = ctx.function("vt_gemv_f32_f32_m" + std::to_string(1 << lm));
  for (int yf = 0; yf < 2; ++yf)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const std::string y = act == Act::F32 || yf ? "f32" : "bf16";
      gemm_[yf][int(dt)] = ctx.function("vt_gemm_" + a + "_" + table_name(dt) + "_" + y);
    }
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    gemm_x32_[int(dt)] = ctx.function(std::string("vt_gemm_f32_") + table_name(dt) + "_f32");
  attention_[0] = ctx.function("vt_paged_attention_" + a + "_d4");
  attention_[1] = ctx.function("vt_paged_attention_" + a + "_d8");
}

void Ops::embed(CUstream s, CUdeviceptr table, DType dt, int64_t dim, CUdeviceptr ids, int64_t T, CUdeviceptr out,
                bool out_f32) {
  require(fits_int(dim) && T >= 0 && T <= INT_MAX, "embed shape");
  if (T == 0) return;
  const int d = int(dim);
  ctx_.launch(embed_[out_f32 ? 1 : 0][int(dt)], {unsigned(T)}, {256}, 0, s, table, d, ids, out);
}

void Ops::rmsnorm(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps, CUdeviceptr out) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "rmsnorm shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch(rmsnorm_, {unsigned(rows)}, {256}, 0, s, x, d, weight, eps, out);
}

void Ops::add_rmsnorm(CUstream s, CUdeviceptr residual, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight,
                      float eps, CUdeviceptr out) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "add_rmsnorm shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch(add_rmsnorm_, {unsigned(rows)}, {256}, 0, s, residual, x, d, weight, eps, out);
}

void Ops::rmsnorm_res32(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps,
                        CUdeviceptr out) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "rmsnorm_res32 shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch(rmsnorm_res32_, {unsigned(rows)}, {256}, 0, s, x, d, weight, eps, out);
}

void Ops::add_rmsnorm_res32(CUstream s, CUdeviceptr residual, CUdeviceptr x, bool x_f32, int64_t rows, int64_t dim,
                            CUdeviceptr weight, float eps, CUdeviceptr out, bool out_f32) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "add_rmsnorm_res32 shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch(add_rmsnorm_res32_[x_f32 ? 1 : 0][out_f32 ? 1 : 0], {unsigned(rows)}, {256}, 0, s, residual, x, d,
              weight, eps, out);
}

void Ops::rope(CUstream s, CUdeviceptr x, int64_t T, int32_t n_heads, int32_t head_dim, int64_t row_stride,
               CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr norm_weight, float eps) {
  require(head_dim > 0 && head_dim % 2 == 0 && n_heads > 0 && fits_int(T), "rope shape");
  if (T == 0) return;
  const long long stride = row_stride ? row_stride : int64_t(n_heads) * head_dim;
  constexpr unsigned kThreads = 128;
  const unsigned shared = unsigned(head_dim) * (1 + kThreads / 32) * sizeof(float);
  ctx_.launch(rope_, {unsigned(T)}, {kThreads}, shared, s, x, n_heads, head_dim, stride, pos, inv_freq, attn_scale,
              norm_weight, eps);
}

void Ops::silu_mul(CUstream s, CUdeviceptr gate, CUdeviceptr up, int64_t T, int64_t F, int64_t ld, CUdeviceptr out) {
  require(fits_int(F) && T >= 0, "silu_mul shape");
  if (T == 0 || F == 0) return;
  const long long rows = T, lda = ld ? ld : F;
  const int f = int(F);
  const unsigned grid = unsigned(std::min<int64_t>(blocks_for(T * F, 256), int64_t(ctx_.sm_count()) * 16));
  ctx_.launch(silu_mul_, {grid}, {256}, 0, s, gate, up, rows, f, lda, out);
}

void Ops::gemv(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias,
               CUdeviceptr y, bool y_f32, bool x_f32) {
  require(fits_int(K) && K > 0 && fits_int(N) && M >= 0 && (!x_f32 || y_f32 || act_ == Act::F32), "gemv shape");
  if (M == 0 || N == 0) return;
  x_f32 = x_f32 && act_ != Act::F32;  // fp32 activations: the plain kernels are the fp32 ones
  const size_t xs = x_f32 ? 4 : act_size(act_), ys = act_ == Act::F32 || y_f32 ? 4 : 2;
  const int k = int(K), n = int(N);
  // 16-byte weight and x loads need every row 16-byte aligned.
  const int vec = K % 8 == 0 && w % 16 == 0 && x % 16 == 0;
  constexpr unsigned kRowsPerBlock = 8;  // one warp per output row
  const Dim3 grid{blocks_for(N, kRowsPerBlock)};
  // Largest M chunk first: 8, then what is left by powers of two. Each chunk reads w once.
  for (int64_t m0 = 0; m0 < M;) {
    const int64_t left = M - m0;
    const int lm = left >= 8 ? 3 : left >= 4 ? 2 : left >= 2 ? 1 : 0;
    const CUdeviceptr xm = x + CUdeviceptr(m0 * K * int64_t(xs)), ym = y + CUdeviceptr(m0 * N * int64_t(ys));
    ctx_.launch(x_f32 ? gemv_x32_[lm] : gemv_[y_f32 ? 1 : 0][lm], grid, {kRowsPerBlock * 32}, 0, s, xm, w, bias, ym, k, n, vec);
    m0 += int64_t(1) << lm;
  }
}

void Ops::gemm(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, DType wdt, int64_t N, CUdeviceptr bias,
               CUdeviceptr y, bool y_f32, bool x_f32) {
  require(fits_int(K) && K > 0 && fits_int(N) && fits_int(M) && (!x_f32 || y_f32 || act_ == Act::F32), "gemm shape");
  if (M == 0 || N == 0) return;
  x_f32 = x_f32 && act_ != Act::F32;
  const int m = int(M), n = int(N), k = int(K);
  ctx_.launch(x_f32 ? gemm_x32_[int(wdt)] : gemm_[y_f32 ? 1 : 0][int(wdt)], {blocks_for(N, 64), blocks_for(M, 64)}, {256}, 0, s, x, w, bias, y, m, n, k);
}

void Ops::kv_store(CUstream s, CUdeviceptr k, CUdeviceptr v, int64_t T, int32_t n_kv_heads, int32_t head_dim,
                   CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache) {
  require(fits_int(T) && n_kv_heads > 0 && head_dim > 0 && fits_int(int64_t(n_kv_heads) * head_dim), "kv_store shape");
  if (T == 0) return;
  const int row = n_kv_heads * head_dim;
  ctx_.launch(kv_store_, {unsigned(T)}, {128}, 0, s, k, v, row, slot, k_cache, v_cache);
}

void Ops::attention(CUstream s, CUdeviceptr q, CUdeviceptr k_cache, CUdeviceptr v_cache, const DeviceAttentionBatch &b,
                    int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, CUdeviceptr out) {
  require(n_kv_heads > 0 && n_heads % n_kv_heads == 0 && head_dim > 0 && head_dim <= 256 && b.n_seqs > 0 &&
              b.block_size > 0 && fits_int(T) && T <= 65535,
          "attention shape");
  if (T == 0) return;
  const CUfunction f = attention_[head_dim <= 128 ? 0 : 1];
  ctx_.launch(f, {unsigned(n_heads), unsigned(T)}, {128}, 0, s, q, k_cache, v_cache, b.seq_q_start, b.seq_pos0,
              b.block_tables, b.n_seqs, b.max_blocks_per_seq, b.block_size, n_heads, n_kv_heads, head_dim, scale, out);
}

}  // namespace vt::cuda
