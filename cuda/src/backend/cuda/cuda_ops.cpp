// Host side of the CUDA ops: shape checks, launch geometry and the kernel names (entry points in the .cu
// files of this folder; the names encode the element types, e.g. vt_gemv_bf16_f32_m4).
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "status.h"

namespace vt::cuda {

namespace {

const char *table_name(DType dt) { return dt == DType::F32 ? "f32" : dt == DType::F16 ? "f16" : "bf16"; }

unsigned blocks_for(int64_t n, int64_t per_block) { return unsigned((n + per_block - 1) / per_block); }

void require(bool ok, const char *what) {
  if (!ok) fail(VT_ERR_INTERNAL, std::string("CUDA op called with bad arguments: ") + what);
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// A StepAdvance the kernels can follow for n rows (null: none); one marked moved reads positions only.
bool advance_ok(const StepAdvance *a, int64_t n) {
  return !a || (a->host_picks && a->positions && a->picks_stride >= n &&
                (a->moved || (a->slots && a->seq_pos0 && a->tables && a->table_width > 0 && a->block_size > 0)));
}

// attention_split.cuh's kSplitKeys (split lengths are multiples of it), kMaxSplits and kSplitWarps.
constexpr int64_t kSplitKeys = 64, kMaxSplits = 256, kSplitWarps = 4;

// gemv.cuh's launch: one warp per output (a row, or a gate/up row pair), 8 per block; more rows of x than 8 go
// in chunks of 8, then what is left by powers of two.
constexpr unsigned kGemvThreads = 256;
Dim3 gemv_grid(const Context &, int64_t units) { return {unsigned((units + 7) / 8)}; }
int gemv_chunk_log2(int64_t rows_left) { return rows_left >= 8 ? 3 : rows_left >= 4 ? 2 : rows_left >= 2 ? 1 : 0; }

// attention_prefill.cuh's prefill_smem_bytes: K and V, two stages of 64 keys (32 for head_dim 256) of head_dim + 8
// bf16, and for head_dim 256 Q's own kPrefillTileRows rows.
unsigned prefill_smem_bytes(int32_t head_dim) {
  const int32_t keys = head_dim > 128 ? 32 : 64, q_rows = head_dim > 128 ? Ops::kPrefillTileRows : 0;
  return unsigned((4 * keys + q_rows) * (head_dim + 8) * 2);
}
// attention_prefill_[i]'s head_dim, and the i of a head_dim (-1: none)
constexpr int32_t kPrefillHeadDims[3] = {64, 128, 256};
int prefill_index(int32_t head_dim) {
  for (int i = 0; i < 3; ++i)
    if (head_dim == kPrefillHeadDims[i]) return i;
  return -1;
}

}  // namespace

Ops::Ops(Context &ctx, Act act, const CudaOpsTuning &tuning) : ctx_(ctx), act_(act) {
  const std::string a = act_name(act);
  // The GEMVs' early weight loads (gemv.cuh's EARLY, the *_early entry points): only meaningful under PDL,
  // where they are the product (bench/RESULTS.md); the plain kernels otherwise. Picked once here.
  early_loads_ = ctx.pdl() && tuning.early_loads;
  const std::string early = early_loads_ ? "_early" : "";
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    embed_[0][int(dt)] = ctx.function(std::string("vt_embed_") + table_name(dt) + "_to_" + a);
    embed_[1][int(dt)] = ctx.function(std::string("vt_embed_") + table_name(dt) + "_to_f32");
    embed_norm_[int(dt)] = ctx.find_function(std::string("vt_embed_norm_") + table_name(dt) + "_to_" + a);
  }
  rmsnorm_ = ctx.function("vt_rmsnorm_" + a);
  add_rmsnorm_ = ctx.function("vt_add_rmsnorm_" + a);
  rmsnorm_res32_ = act == Act::F32 ? rmsnorm_ : ctx.function("vt_rmsnorm_f32_to_bf16");
  rmsnorm_f32_ = ctx.function("vt_rmsnorm_f32");
  for (int xf = 0; xf < 2; ++xf)
    for (int of = 0; of < 2; ++of)
      add_rmsnorm_res32_[xf][of] =
          act == Act::F32 ? add_rmsnorm_
                          : ctx.function(std::string("vt_add_rmsnorm_res32_") + (xf ? "f32" : "bf16") + "_" +
                                         (of ? "f32" : "bf16"));
  rope_ = ctx.function("vt_rope_" + a);
  silu_mul_ = ctx.function("vt_silu_mul_" + a);
  f16_to_bf16_ = ctx.function("vt_f16_to_bf16");
  split_q_gate_ = ctx.function("vt_split_q_gate_" + a);
  sigmoid_mul_ = ctx.function("vt_sigmoid_mul_" + a);
  kv_store_ = ctx.function("vt_kv_store_" + a);
  for (int yf = 0; yf < 2; ++yf)
    for (int lm = 0; lm < 4; ++lm) {
      // fp32 activations have only an fp32 output; bf16 ones give bf16 or fp32 (logits).
      const std::string y = act == Act::F32 || yf ? "f32" : "bf16";
      gemv_[yf][lm] = ctx.function("vt_gemv_" + a + "_" + y + "_m" + std::to_string(1 << lm) + early);
    }
  for (int lm = 0; lm < 4; ++lm) gemv_x32_[lm] = ctx.function("vt_gemv_f32_f32_m" + std::to_string(1 << lm) + early);
  for (int lm = 0; lm < 4; ++lm)
    gemv_swiglu_[lm] = ctx.function("vt_gemv_swiglu_" + a + "_m" + std::to_string(1 << lm) + early);
  // Decode attention splits no shorter than this many keys (a multiple of 64, the default; longer ones are an
  // experiment, VT_CUDA_SPLIT_KEYS): short contexts then run in fewer splits and fewer partials to merge.
  split_keys_ = std::max(int(kSplitKeys), tuning.split_keys / int(kSplitKeys) * int(kSplitKeys));
  // The fused-norm forms (the decode step's default for up to 8 rows): when a kernel image lacks them
  // fused_gemv_available() says no and the step uses the separate kernels.
  fused_ = true;
  for (int lm = 0; lm < 4; ++lm) {
    const std::string m = "_m" + std::to_string(1 << lm) + early;
    gemv_norm_[lm] = ctx.find_function("vt_gemv_norm_" + a + m);
    gemv_swiglu_norm_[lm] = ctx.find_function("vt_gemv_swiglu_norm_" + a + m);
    for (int rf = 0; rf < 2; ++rf)
      gemv_res_[rf][lm] = ctx.find_function("vt_gemv_res_" + a + "_" + (act == Act::F32 || rf ? "f32" : "bf16") + m);
    fused_ = fused_ && gemv_norm_[lm] && gemv_swiglu_norm_[lm] && gemv_res_[0][lm] && gemv_res_[1][lm];
  }
  gemv_norm_head_ = ctx.find_function("vt_gemv_norm_head_" + a + "_m1" + early);
  for (int hd = 0; hd < 2; ++hd)
    for (int lm = 0; lm < 4; ++lm)
      gemv_norm_rope_[hd][lm] = ctx.find_function("vt_gemv_norm_rope_" + a + "_hd" + std::to_string(64 << hd) + "_m" +
                                                  std::to_string(1 << lm) + early);

  for (int yf = 0; yf < 2; ++yf)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const std::string y = act == Act::F32 || yf ? "f32" : "bf16";
      gemm_[yf][int(dt)] = ctx.function("vt_gemm_" + a + "_" + table_name(dt) + "_" + y);
    }
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    gemm_x32_[int(dt)] = ctx.function(std::string("vt_gemm_f32_") + table_name(dt) + "_f32");
  attention_[0] = ctx.function("vt_paged_attention_" + a + "_d4");
  attention_[1] = ctx.function("vt_paged_attention_" + a + "_d8");
  attention_split_[0] = ctx.function("vt_attention_split_" + a + "_d4");
  attention_split_[1] = ctx.function("vt_attention_split_" + a + "_d8");
  if (act == Act::BF16)
    for (int i = 0; i < 3; ++i)
      attention_split_mma_[i] = ctx.function("vt_attention_split_bf16_mma_hd" + std::to_string(64 << i));
  if (act == Act::BF16 && tuning.attention_cluster)
    for (int i = 0; i < 3; ++i)
      attention_split_cluster_[i] =
          ctx.find_function("vt_attention_split_bf16_mma_hd" + std::to_string(64 << i) + "_cluster");
  int smem_optin = 0;
  check(driver().cuDeviceGetAttribute(&smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx.device()),
        "cuDeviceGetAttribute(shared memory per block)");
  if (act == Act::BF16)
    for (int i = 0; i < 3; ++i) {
      const int32_t hd = kPrefillHeadDims[i];
      if (int(prefill_smem_bytes(hd)) > smem_optin) continue;  // (head_dim 256 needs 99 KiB: every target has it)
      attention_prefill_[i] = ctx.function("vt_attention_prefill_bf16_d" + std::to_string(hd));
      // above the default 48 KB for head_dim 128; set once here, never during a graph capture
      check(driver().cuFuncSetAttribute(attention_prefill_[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        int(prefill_smem_bytes(hd))),
            "cuFuncSetAttribute(vt_attention_prefill_bf16_d" + std::to_string(hd) + ")");
    }
  rope_store_ = ctx.function("vt_rope_store_" + a);
  argmax_ = ctx.function("vt_argmax_f32");
  if (tuning.argmax_parts)
    argmax_parts_ = ctx.find_function("vt_argmax_parts_f32");
  sample_ = ctx.function("vt_sample_f32");
  penalties_ = ctx.function("vt_penalties_f32");
  top_logprobs_ = ctx.function("vt_top_logprobs_f32");
}

void Ops::embed(CUstream s, CUdeviceptr table, DType dt, int64_t dim, CUdeviceptr ids, int64_t T, CUdeviceptr out,
                bool out_f32) {
  require(fits_int(dim) && T >= 0 && T <= INT_MAX, "embed shape");
  if (T == 0) return;
  const int d = int(dim);
  ctx_.launch_pdl(embed_[out_f32 ? 1 : 0][int(dt)], {unsigned(T)}, {256}, 0, s, table, d, ids, out);
}

void Ops::embed_norm(CUstream s, CUdeviceptr table, DType dt, int64_t dim, CUdeviceptr ids, int64_t T,
                     CUdeviceptr residual, CUdeviceptr norm_w, CUdeviceptr xw, CUdeviceptr ss_part) {
  require(has_embed_norm() && fits_int(dim) && dim > 0 && T >= 0 && T <= INT_MAX,
          "embed_norm shape (or a build without it)");
  if (T == 0) return;
  const int d = int(dim);
  ctx_.launch_pdl(embed_norm_[int(dt)], {unsigned(T)}, {256}, 0, s, table, d, ids, residual, norm_w, xw, ss_part);
}

void Ops::rmsnorm(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps, CUdeviceptr out) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "rmsnorm shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch_pdl(rmsnorm_, {unsigned(rows)}, {256}, 0, s, x, d, weight, eps, out);
}

void Ops::add_rmsnorm(CUstream s, CUdeviceptr residual, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight,
                      float eps, CUdeviceptr out) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "add_rmsnorm shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch_pdl(add_rmsnorm_, {unsigned(rows)}, {256}, 0, s, residual, x, d, weight, eps, out);
}

void Ops::rmsnorm_res32(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps,
                        CUdeviceptr out, bool out_f32) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "rmsnorm_res32 shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch_pdl(out_f32 ? rmsnorm_f32_ : rmsnorm_res32_, {unsigned(rows)}, {256}, 0, s, x, d, weight, eps, out);
}

void Ops::add_rmsnorm_res32(CUstream s, CUdeviceptr residual, CUdeviceptr x, bool x_f32, int64_t rows, int64_t dim,
                            CUdeviceptr weight, float eps, CUdeviceptr out, bool out_f32) {
  require(fits_int(dim) && dim > 0 && fits_int(rows), "add_rmsnorm_res32 shape");
  if (rows == 0) return;
  const int d = int(dim);
  ctx_.launch_pdl(add_rmsnorm_res32_[x_f32 ? 1 : 0][out_f32 ? 1 : 0], {unsigned(rows)}, {256}, 0, s, residual, x, d,
              weight, eps, out);
}

void Ops::rope(CUstream s, CUdeviceptr x, int64_t T, int32_t n_heads, int32_t head_dim, int64_t row_stride,
               CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr norm_weight, float eps,
               int32_t rotary_dims) {
  const int rot = rotary_dims ? rotary_dims : head_dim;
  require(head_dim > 0 && head_dim % 2 == 0 && rot > 0 && rot % 2 == 0 && rot <= head_dim && n_heads > 0 &&
              fits_int(T),
          "rope shape");
  if (T == 0) return;
  const long long stride = row_stride ? row_stride : int64_t(n_heads) * head_dim;
  constexpr unsigned kThreads = 128;
  const unsigned shared = unsigned(head_dim) * (1 + kThreads / 32) * sizeof(float);
  ctx_.launch_pdl(rope_, {unsigned(T)}, {kThreads}, shared, s, x, n_heads, head_dim, rot, stride, pos, inv_freq,
                  attn_scale, norm_weight, eps);
}

void Ops::silu_mul(CUstream s, CUdeviceptr gate, CUdeviceptr up, int64_t T, int64_t F, int64_t ld, CUdeviceptr out) {
  require(fits_int(F) && T >= 0, "silu_mul shape");
  if (T == 0 || F == 0) return;
  const long long rows = T, lda = ld ? ld : F;
  const int f = int(F);
  const unsigned grid = unsigned(std::min<int64_t>(blocks_for(T * F, 256), int64_t(ctx_.sm_count()) * 16));
  ctx_.launch_pdl(silu_mul_, {grid}, {256}, 0, s, gate, up, rows, f, lda, out);
}

void Ops::f16_to_bf16(CUstream s, CUdeviceptr w, int64_t n) {
  require(n >= 0 && w % 2 == 0, "f16_to_bf16 arguments");
  if (n == 0) return;
  const long long count = n;
  const unsigned grid = unsigned(std::min<int64_t>(blocks_for(n, 256), int64_t(ctx_.sm_count()) * 16));
  ctx_.launch(f16_to_bf16_, {grid}, {256}, 0, s, w, count);
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
  const Dim3 grid = gemv_grid(ctx_, N);
  for (int64_t m0 = 0; m0 < M;) {  // each chunk reads w once
    const int lm = gemv_chunk_log2(M - m0);
    const CUdeviceptr xm = x + CUdeviceptr(m0 * K * int64_t(xs)), ym = y + CUdeviceptr(m0 * N * int64_t(ys));
    const CUfunction f = x_f32 ? gemv_x32_[lm] : gemv_[y_f32 ? 1 : 0][lm];
    ctx_.launch_pdl(f, grid, {kGemvThreads}, 0, s, xm, w, bias, ym, k, n, vec);
    m0 += int64_t(1) << lm;
  }
}

void Ops::gemv_swiglu(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w_gate_up, int64_t I,
                      CUdeviceptr y) {
  require(fits_int(K) && K > 0 && fits_int(I) && M >= 0, "gemv_swiglu shape");
  if (M == 0 || I == 0) return;
  const int64_t as = int64_t(act_size(act_));
  const int k = int(K), i = int(I);
  const int vec = K % 8 == 0 && w_gate_up % 16 == 0 && x % 16 == 0;  // as for gemv; up rows follow suit
  const Dim3 grid = gemv_grid(ctx_, I);
  for (int64_t m0 = 0; m0 < M;) {
    const int lm = gemv_chunk_log2(M - m0);
    const CUdeviceptr xm = x + CUdeviceptr(m0 * K * as), ym = y + CUdeviceptr(m0 * I * as);
    const CUfunction f = gemv_swiglu_[lm];
    ctx_.launch_pdl(f, grid, {kGemvThreads}, 0, s, xm, w_gate_up, ym, k, i, vec);
    m0 += int64_t(1) << lm;
  }
}

// The fused norm's products (gemv_norm, gemv_swiglu_norm): f over xw's rows in gemv's chunks of M.
void Ops::launch_gemv_norm(CUfunction const (&f)[4], CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M,
                           int64_t K, float eps, CUdeviceptr w, int64_t N, CUdeviceptr bias, CUdeviceptr y,
                           bool with_bias) {
  if (M == 0 || N == 0) return;
  const int64_t as = int64_t(act_size(act_)), parts = norm_parts(K);
  const int k = int(K), n = int(N);
  const int vec = K % 8 == 0 && w % 16 == 0 && xw % 16 == 0;  // as for gemv
  for (int64_t m0 = 0; m0 < M;) {
    const int lm = gemv_chunk_log2(M - m0);
    const CUdeviceptr xm = xw + CUdeviceptr(m0 * K * as), pm = ss_part + CUdeviceptr(m0 * parts * 4),
                      ym = y + CUdeviceptr(m0 * N * as);
    if (with_bias) ctx_.launch_pdl(f[lm], gemv_grid(ctx_, N), {kGemvThreads}, 0, s, xm, pm, eps, w, bias, ym, k, n, vec);
    else ctx_.launch_pdl(f[lm], gemv_grid(ctx_, N), {kGemvThreads}, 0, s, xm, pm, eps, w, ym, k, n, vec);
    m0 += int64_t(1) << lm;
  }
}

void Ops::gemv_norm(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M, int64_t K, float eps, CUdeviceptr w,
                    int64_t N, CUdeviceptr bias, CUdeviceptr y) {
  require(fused_ && fits_int(K) && K > 0 && fits_int(N) && M >= 0 && ss_part,
          "gemv_norm shape (or a build without it)");
  launch_gemv_norm(gemv_norm_, s, xw, ss_part, M, K, eps, w, N, bias, y, true);
}

void Ops::gemv_swiglu_norm(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M, int64_t K, float eps,
                           CUdeviceptr w_gate_up, int64_t I, CUdeviceptr y) {
  require(fused_ && fits_int(K) && K > 0 && fits_int(I) && M >= 0 && ss_part,
          "gemv_swiglu_norm shape (or a build without it)");
  launch_gemv_norm(gemv_swiglu_norm_, s, xw, ss_part, M, K, eps, w_gate_up, I, 0, y, false);
}

void Ops::gemv_norm_head(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t K, float eps, CUdeviceptr w,
                         int64_t N, CUdeviceptr y, CUdeviceptr residual, CUdeviceptr norm_w, CUdeviceptr final_rows) {
  require(has_gemv_norm_head() && fits_int(K) && K > 0 && fits_int(N) && ss_part && residual && norm_w && final_rows,
          "gemv_norm_head shape (or a build without it)");
  if (N == 0) return;
  const int k = int(K), n = int(N);
  const int vec = K % 8 == 0 && w % 16 == 0 && xw % 16 == 0;  // as for gemv
  ctx_.launch_pdl(gemv_norm_head_, gemv_grid(ctx_, N), {kGemvThreads}, 0, s, xw, ss_part, eps, w, y, k, n, vec,
                  residual, norm_w, final_rows);
}

bool Ops::has_gemv_norm_rope(int32_t head_dim) const {
  if (!fused_ || (head_dim != 64 && head_dim != 128)) return false;
  for (CUfunction f : gemv_norm_rope_[head_dim == 64 ? 0 : 1])
    if (!f) return false;
  return true;
}

void Ops::gemv_norm_rope(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M, int64_t K, float eps,
                         CUdeviceptr w, CUdeviceptr bias, CUdeviceptr qkv, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr q_norm,
                         CUdeviceptr k_norm, CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache) {
  const int64_t units = int64_t(n_heads) + 2 * int64_t(n_kv_heads), N = units * head_dim;
  require(has_gemv_norm_rope(head_dim) && fits_int(K) && K > 0 && n_heads > 0 && n_kv_heads > 0 && fits_int(N) &&
              M >= 0 && ss_part,
          "gemv_norm_rope shape (or a build without it)");
  if (M == 0) return;
  const int64_t as = int64_t(act_size(act_)), parts = norm_parts(K);
  const int k = int(K), nh = n_heads, nkv = n_kv_heads;
  const int vec = K % 8 == 0 && w % 16 == 0 && xw % 16 == 0;  // as for gemv
  // one warp per pair of a head's rows, 8 a block: head_dim / 16 blocks (a cluster) per head
  const Dim3 grid{unsigned(units * head_dim / 16)};
  for (int64_t m0 = 0; m0 < M;) {
    const int lm = gemv_chunk_log2(M - m0);
    const CUdeviceptr xm = xw + CUdeviceptr(m0 * K * as), pm = ss_part + CUdeviceptr(m0 * parts * 4),
                      ym = qkv + CUdeviceptr(m0 * N * as), posm = pos + CUdeviceptr(m0 * 4),
                      slotm = slot + CUdeviceptr(m0 * 4);
    ctx_.launch_pdl(gemv_norm_rope_[head_dim == 64 ? 0 : 1][lm], grid, {kGemvThreads}, 0, s, xm, pm, eps, w, bias, ym,
                    k, nh, nkv, vec, posm, inv_freq, attn_scale, q_norm, k_norm, slotm, k_cache, v_cache);
    m0 += int64_t(1) << lm;
  }
}

void Ops::gemv_residual(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias,
                        CUdeviceptr residual, CUdeviceptr ss_part, CUdeviceptr next_norm_w, CUdeviceptr xw,
                        bool round_f32) {
  require(fused_ && fits_int(K) && K > 0 && fits_int(N) && M >= 0 && ss_part && next_norm_w && xw,
          "gemv_residual shape (or a build without it)");
  if (M == 0 || N == 0) return;
  const int64_t as = int64_t(act_size(act_)), parts = norm_parts(N);
  const int k = int(K), n = int(N);
  const int vec = K % 8 == 0 && w % 16 == 0 && x % 16 == 0;
  // one block per norm part: gemv_grid's ceil(N / 8) blocks of 8 rows are the partials' count
  static_assert(kGemvThreads == 256, "gemv.cuh's kResidualSS sums 8 warps");
  for (int64_t m0 = 0; m0 < M;) {
    const int lm = gemv_chunk_log2(M - m0);
    const CUdeviceptr xm = x + CUdeviceptr(m0 * K * as), rm = residual + CUdeviceptr(m0 * N * 4),
                      pm = ss_part + CUdeviceptr(m0 * parts * 4), wm = xw + CUdeviceptr(m0 * N * as);
    ctx_.launch_pdl(gemv_res_[round_f32 ? 1 : 0][lm], gemv_grid(ctx_, N), {kGemvThreads}, 0, s, xm, w, bias, rm, pm,
                    next_norm_w, wm, k, n, vec);
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

void Ops::split_q_gate(CUstream s, CUdeviceptr src, int64_t T, int32_t n_heads, int32_t head_dim, int64_t rest,
                       CUdeviceptr qkv, CUdeviceptr gate) {
  require(T >= 0 && n_heads > 0 && head_dim > 0 && rest >= 0 && fits_int(int64_t(n_heads) * 2 * head_dim),
          "split_q_gate shape");
  if (T == 0) return;
  const int64_t n = T * (2 * int64_t(n_heads) * head_dim + rest);
  const unsigned grid = unsigned(std::min<int64_t>(blocks_for(n, 256), int64_t(ctx_.sm_count()) * 16));
  const long long rows = T, r = rest;
  ctx_.launch_pdl(split_q_gate_, {grid}, {256}, 0, s, src, rows, n_heads, head_dim, r, qkv, gate);
}

void Ops::sigmoid_mul(CUstream s, CUdeviceptr x, CUdeviceptr gate, int64_t n) {
  require(n >= 0, "sigmoid_mul shape");
  if (n == 0) return;
  const unsigned grid = unsigned(std::min<int64_t>(blocks_for(n, 256), int64_t(ctx_.sm_count()) * 16));
  const long long count = n;
  ctx_.launch_pdl(sigmoid_mul_, {grid}, {256}, 0, s, x, gate, count);
}

void Ops::kv_store(CUstream s, CUdeviceptr k, CUdeviceptr v, int64_t T, int32_t n_kv_heads, int32_t head_dim,
                   CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache) {
  require(fits_int(T) && n_kv_heads > 0 && head_dim > 0 && fits_int(int64_t(n_kv_heads) * head_dim), "kv_store shape");
  if (T == 0) return;
  const int row = n_kv_heads * head_dim;
  ctx_.launch_pdl(kv_store_, {unsigned(T)}, {128}, 0, s, k, v, row, slot, k_cache, v_cache);
}

void Ops::rope_store(CUstream s, CUdeviceptr qkv, int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                     CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr q_norm, CUdeviceptr k_norm,
                     float eps, CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache, int32_t rotary_dims) {
  constexpr unsigned kWarps = 4;  // one head per warp
  const int64_t units = int64_t(n_heads) + 2 * int64_t(n_kv_heads);
  const int rot = rotary_dims ? rotary_dims : head_dim;
  require(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 2048 && rot > 0 && rot % 2 == 0 && rot <= head_dim &&
              n_heads > 0 && n_kv_heads > 0 && fits_int(T) && fits_int(units * head_dim) &&
              blocks_for(units, kWarps) <= 65535,
          "rope_store shape");
  if (T == 0) return;
  const unsigned shared = unsigned(head_dim) * (1 + kWarps) * sizeof(float);
  ctx_.launch_pdl(rope_store_, {unsigned(T), blocks_for(units, kWarps)}, {kWarps * 32}, shared, s, qkv, n_heads,
                  n_kv_heads, head_dim, rot, pos, inv_freq, attn_scale, q_norm, k_norm, eps, slot, k_cache, v_cache);
}

void Ops::argmax(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, CUdeviceptr out_ids,
                 CUdeviceptr out_logprobs, CUdeviceptr also_ids, const StepAdvance *advance) {
  if (ld == 0) ld = vocab;
  require(vocab > 0 && vocab <= (int64_t(1) << 24) && ld >= vocab && fits_int(n), "argmax shape");
  require(advance_ok(advance, n), "argmax step advance");
  if (n == 0) return;
  const int v = int(vocab), vec = ld % 4 == 0 && logits % 16 == 0;
  const long long stride = ld;
  const StepAdvance adv = advance ? *advance : StepAdvance{};
  if (argmax_parts(n))
    ctx_.launch_pdl(argmax_parts_, {unsigned(n), kArgmaxParts}, {1024}, 0, s, logits, stride, v, vec, out_ids,
                    out_logprobs, also_ids, adv);
  else
    ctx_.launch_pdl(argmax_, {unsigned(n)}, {1024}, 0, s, logits, stride, v, vec, out_ids, out_logprobs, also_ids,
                    adv);
}

void Ops::sample(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, CUdeviceptr rows,
                 CUdeviceptr out_ids, CUdeviceptr out_logprobs, CUdeviceptr also_ids, const StepAdvance *advance) {
  if (ld == 0) ld = vocab;
  require(vocab > 0 && vocab <= kSampleMaxVocab && ld >= vocab && fits_int(n) && (n == 0 || (rows && rows % 8 == 0)),
          "sample shape");
  require(advance_ok(advance, n), "sample step advance");
  if (n == 0) return;
  const int v = int(vocab), vec = ld % 4 == 0 && logits % 16 == 0;
  const long long stride = ld;
  const StepAdvance adv = advance ? *advance : StepAdvance{};
  ctx_.launch_pdl(sample_, {unsigned(n)}, {1024}, 0, s, logits, stride, v, vec, rows, out_ids, out_logprobs, also_ids,
                  adv);
}

void Ops::top_logprobs(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, int32_t top_n,
                       CUdeviceptr out_ids, CUdeviceptr out_logprobs) {
  if (ld == 0) ld = vocab;
  require(vocab > 0 && vocab <= kSampleMaxVocab && ld >= vocab && fits_int(n) && top_n >= 1 && top_n <= 20 &&
              (n == 0 || (out_ids && out_logprobs)),
          "top_logprobs shape");
  if (n == 0) return;
  const int v = int(vocab), vec = ld % 4 == 0 && logits % 16 == 0, k = top_n;
  const long long stride = ld;
  ctx_.launch_pdl(top_logprobs_, {unsigned(n)}, {1024}, 0, s, logits, stride, v, vec, k, out_ids, out_logprobs);
}

void Ops::apply_penalties(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, CUdeviceptr rows,
                          CUdeviceptr seen_offsets, CUdeviceptr seen_ids, CUdeviceptr seen_counts,
                          CUdeviceptr bias_offsets, CUdeviceptr bias_ids, CUdeviceptr bias_values) {
  if (ld == 0) ld = vocab;
  require(vocab > 0 && fits_int(vocab) && ld >= vocab && fits_int(n) && (!seen_offsets || (seen_ids && seen_counts)) &&
              (!bias_offsets || (bias_ids && bias_values)),
          "apply_penalties shape");
  if (n == 0 || (!bias_offsets && (!rows || !seen_offsets))) return;
  const int v = int(vocab);
  const long long stride = ld;
  ctx_.launch_pdl(penalties_, {unsigned(n)}, {256}, 0, s, logits, stride, v, rows, seen_offsets, seen_ids, seen_counts,
              bias_offsets, bias_ids, bias_values);
}

void Ops::attention(CUstream s, CUdeviceptr q, CUdeviceptr k_cache, CUdeviceptr v_cache, const DeviceAttentionBatch &b,
                    int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, CUdeviceptr out,
                    int64_t q_row_stride) {
  require(n_kv_heads > 0 && n_heads % n_kv_heads == 0 && head_dim > 0 && head_dim <= 256 && b.n_seqs > 0 &&
              b.block_size > 0 && fits_int(T) && T <= 65535,
          "attention shape");
  if (T == 0) return;
  const CUfunction f = attention_[head_dim <= 128 ? 0 : 1];
  const long long stride = q_row_stride ? q_row_stride : int64_t(n_heads) * head_dim;
  require(stride >= int64_t(n_heads) * head_dim, "attention q_row_stride");
  ctx_.launch_pdl(f, {unsigned(n_heads), unsigned(T)}, {128}, 0, s, q, stride, k_cache, v_cache, b.seq_q_start, b.seq_pos0,
              b.block_tables, b.n_seqs, b.max_blocks_per_seq, b.block_size, n_heads, n_kv_heads, head_dim, scale, out);
}

namespace {

// attention_decode's workspace: (m, l) (T, n_heads, n_splits, 2) fp32 | acc (T, n_heads, n_splits, head_dim) fp32,
// each part starting 256-byte aligned. Nothing for one split. (The tickets are a buffer of their own.)
struct SplitWorkspace {
  size_t ml = 0, acc = 0, bytes = 0;  // offsets of the parts, total
};

SplitWorkspace split_workspace(int64_t T, int32_t n_heads, int32_t head_dim, int32_t n_splits) {
  SplitWorkspace w;
  if (n_splits <= 1) return w;
  const auto aligned = [](size_t bytes) { return (bytes + 255) & ~size_t(255); };
  const size_t partials = size_t(T) * size_t(n_heads) * size_t(n_splits);
  w.ml = 0;
  w.acc = w.ml + aligned(partials * 2 * sizeof(float));
  w.bytes = w.acc + partials * size_t(head_dim) * sizeof(float);
  return w;
}

}  // namespace

// attention_split.cuh's kSplitCluster: the cluster form's splits (and cluster size)
constexpr int kCluster = 8;

// Few rows (batch 1 to 4 on most models): the splits of a (row, kv head) as one cluster that merges them in shared
// memory (attention_split.cuh's cluster_merge), where the grid stays within two blocks an SM; and where it has fewer
// blocks than SMs, only for contexts of up to kClusterMaxKeys keys (bf16 activations, tensor-core head_dims:
// attention_decode's mma condition besides). On the H200 (132 SMs, 8 kv heads): batch 1 (64 blocks) ran 0.75x the
// ticket form at an 8,192-token prompt; batch 4 (256 blocks) 1.01-1.03x it at 1,536 and 8,192 (batch 2 not measured).
bool Ops::attention_cluster(int64_t T, int32_t n_kv_heads, int32_t head_dim, int32_t max_keys) const {
  const int mi = head_dim == 64 ? 0 : head_dim == 128 ? 1 : head_dim == 256 ? 2 : -1;
  const int64_t blocks = T * n_kv_heads * kCluster, sms = ctx_.sm_count();
  return act_ == Act::BF16 && mi >= 0 && attention_split_cluster_[mi] && blocks <= 2 * sms &&
         (blocks >= sms || max_keys <= kClusterMaxKeys);
}

int32_t Ops::attention_splits(int64_t T, int32_t n_kv_heads, int32_t max_keys) const {
  return attention_splits(ctx_.sm_count(), T, n_kv_heads, max_keys);
}

size_t Ops::attention_workspace_bytes(int sm_count, int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                      int32_t max_keys) {
  return split_workspace(T, n_heads, head_dim, attention_splits(sm_count, T, n_kv_heads, max_keys)).bytes;
}

int32_t Ops::attention_splits(int sm_count, int64_t T, int32_t n_kv_heads, int32_t max_keys) {
  // Two blocks per SM where the (row, kv head) pairs alone do not give them, no split shorter than kSplitKeys.
  const int64_t pairs = std::max<int64_t>(1, T * std::max<int32_t>(1, n_kv_heads));
  const int64_t want = (2 * int64_t(sm_count) + pairs - 1) / pairs;
  const int64_t by_len = (std::max<int64_t>(1, max_keys) + kSplitKeys - 1) / kSplitKeys;
  return int32_t(std::clamp<int64_t>(std::min(want, by_len), 1, kMaxSplits));
}

size_t Ops::attention_workspace_bytes(int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                      int32_t max_keys) const {
  return attention_workspace_bytes(ctx_.sm_count(), T, n_heads, n_kv_heads, head_dim, max_keys);
}

void Ops::attention_decode(CUstream s, CUdeviceptr q, int64_t q_row_stride, CUdeviceptr k_cache, CUdeviceptr v_cache,
                           const DeviceAttentionBatch &b, int64_t T, int32_t n_heads, int32_t n_kv_heads,
                           int32_t head_dim, float scale, int32_t max_keys, CUdeviceptr tickets,
                           CUdeviceptr workspace, size_t workspace_bytes, CUdeviceptr out) {
  const long long stride = q_row_stride ? q_row_stride : int64_t(n_heads) * head_dim;
  const int64_t width = int64_t(n_heads) * head_dim;  // what a q row holds
  require(n_kv_heads > 0 && n_kv_heads <= 65535 && n_heads % n_kv_heads == 0 && n_heads / n_kv_heads >= 1 &&
              n_heads / n_kv_heads <= 8 && head_dim > 0 && head_dim <= 256 && b.n_seqs > 0 && b.block_size > 0 &&
              fits_int(T) && stride >= width && max_keys >= 0,
          "attention_decode shape");
  if (T == 0) return;
  const int32_t n_splits = attention_splits(T, n_kv_heads, max_keys);
  const SplitWorkspace w = split_workspace(T, n_heads, head_dim, n_splits);
  require(workspace_bytes >= w.bytes && (w.bytes == 0 || (workspace && workspace % 16 == 0 && tickets)),
          "attention_decode workspace and tickets (see attention_workspace_bytes, attention_tickets_bytes)");
  // Tensor cores read 16-byte pieces of cache rows: head_dim a multiple of 32 and aligned caches.
  const bool mma = act_ == Act::BF16 && (head_dim == 64 || head_dim == 128 || head_dim == 256) &&
                   (k_cache | v_cache) % 16 == 0;
  const int mi = head_dim == 64 ? 0 : head_dim == 128 ? 1 : 2, si = head_dim <= 128 ? 0 : 1;
  const int64_t group = n_heads / n_kv_heads;
  if (mma && attention_cluster(T, n_kv_heads, head_dim, max_keys)) {
    const unsigned shared = unsigned(sizeof(float) * (kSplitWarps + 1) * group * (head_dim + 2));
    const Dim3 grid{unsigned(T), unsigned(n_kv_heads), unsigned(kCluster)}, block{unsigned(kSplitWarps * 32)};
    const CUdeviceptr none = 0;
    ctx_.launch_pdl(attention_split_cluster_[mi], grid, block, shared, s, q, stride, k_cache, v_cache, b.seq_q_start,
                    b.seq_pos0, b.block_tables, b.n_seqs, b.max_blocks_per_seq, b.block_size, n_heads, n_kv_heads,
                    head_dim, scale, kCluster, none, none, none, out, split_keys_);
    return;
  }
  const CUfunction f = mma ? attention_split_mma_[mi] : attention_split_[si];
  // attention_split.cuh's split_smem_floats (kept in step here)
  const int64_t floats = std::max(kSplitWarps * group * (head_dim + 2), group * int64_t(n_splits));
  const unsigned shared = unsigned(sizeof(float) * floats);
  const CUdeviceptr part_ml = workspace + w.ml, part_acc = workspace + w.acc;
  const Dim3 grid{unsigned(T), unsigned(n_kv_heads), unsigned(n_splits)}, block{unsigned(kSplitWarps * 32)};
  ctx_.launch_pdl(f, grid, block, shared, s, q, stride, k_cache, v_cache, b.seq_q_start, b.seq_pos0, b.block_tables,
                  b.n_seqs, b.max_blocks_per_seq, b.block_size, n_heads, n_kv_heads, head_dim, scale, n_splits, tickets,
                  part_ml, part_acc, out, split_keys_);
}

int32_t Ops::prefill_tiles(const int32_t *seq_q_start_host, int32_t n_seqs, std::vector<int32_t> *tiles,
                           const int32_t *seq_pos0_host) {
  struct Tile {
    int64_t keys;
    int32_t seq, row0, rows;
  };
  std::vector<Tile> list;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t r0 = seq_q_start_host[s], r1 = seq_q_start_host[s + 1];
    for (int32_t r = r0; r < r1; r += kPrefillTileRows) {
      const int32_t rows = std::min(kPrefillTileRows, r1 - r);
      list.push_back({int64_t(seq_pos0_host ? seq_pos0_host[s] : 0) + (r - r0) + rows, s, r, rows});
    }
  }
  std::stable_sort(list.begin(), list.end(), [](const Tile &a, const Tile &b) { return a.keys > b.keys; });
  tiles->clear();
  tiles->reserve(list.size() * 3);
  for (const Tile &t : list) tiles->insert(tiles->end(), {t.seq, t.row0, t.rows});
  return int32_t(list.size());
}

bool Ops::has_attention_prefill(int32_t head_dim) const {
  const int i = prefill_index(head_dim);
  return act_ == Act::BF16 && i >= 0 && attention_prefill_[i];
}

void Ops::attention_prefill(CUstream s, CUdeviceptr q, int64_t q_row_stride, CUdeviceptr k_cache,
                            CUdeviceptr v_cache, const DeviceAttentionBatch &b, int64_t T, int32_t n_heads,
                            int32_t n_kv_heads, int32_t head_dim, float scale, CUdeviceptr tiles, int32_t n_tiles,
                            CUdeviceptr out) {
  const long long stride = q_row_stride ? q_row_stride : int64_t(n_heads) * head_dim;
  // 16-byte copies of q rows, cache rows and out rows: every row start must be 16-byte aligned
  require(has_attention_prefill(head_dim) && n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 &&
              b.n_seqs > 0 && b.block_size > 0 && b.max_blocks_per_seq > 0 && scale > 0 && fits_int(T) &&
              n_tiles >= 0 && n_tiles <= 65535 && stride >= int64_t(n_heads) * head_dim && stride % 8 == 0 &&
              (q | k_cache | v_cache | out) % 16 == 0,
          "attention_prefill shape");
  if (T == 0 || n_tiles == 0) return;
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = 2^(x log2 e): the kernel uses exp2
  ctx_.launch(attention_prefill_[prefill_index(head_dim)], {unsigned(n_heads), unsigned(n_tiles)}, {128},
              prefill_smem_bytes(head_dim), s, q, stride, k_cache, v_cache, b.seq_q_start, b.seq_pos0,
              b.block_tables, b.max_blocks_per_seq, b.block_size, n_heads, n_kv_heads, scale_log2, tiles, out);
}

}  // namespace vt::cuda
