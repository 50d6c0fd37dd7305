// The decode step's q|k|v product with RoPE, Qwen3's q/k norm and the KV store in its epilogue: gemv_norm (the fused
// RMSNorm's q|k|v GEMV, gemv.cuh) followed by rope_store (rope.cuh) in one launch, so the layer's chain has one
// launch fewer (VT_CUDA_SKIP=rope measured what that launch costs: 1.074x at Qwen3-0.6B batch 1, bench/RESULTS.md
// session 7).
//
// What it computes, for each of M rows (tokens) of xw (rows times the input norm's weight, as gemv_residual leaves
// them) and their partial sums of squares: y = inv * (xw · wᵀ) + bias over a fused q|k|v matrix whose rows are
// [q heads | k heads | v heads] of head_dim rows each; y is rounded to the activation type (as the q|k|v buffer
// holds it), then each q and k head is normed over its head_dim values (q_norm / k_norm, when not null), rotated
// (HF "rotate_half": pairs (i, i + head_dim / 2)) with cos/sin of pos[m] · inv_freq[i] formed in double and scaled
// by attn_scale, and written back to the q|k|v buffer; the k and v heads also to the cache row slot[m]
// (slot < 0: padding, nothing stored), as rope_store does.
//
// Layout: one warp per pair (i, i + head_dim / 2) of one head, reading both weight rows (gemv_dot with R = 2: the
// SwiGLU form's loop and loads in flight), so a warp ropes its own two outputs. A head's head_dim / 2 pairs are
// head_dim / 16 blocks of 8 warps, one thread-block cluster (sm_90+): each block adds up its warps' squares, the
// cluster's blocks read each other's sums through distributed shared memory (every block in rank order, so they all
// get the same bits), and the head's 1 / rms follows. The head norm sums in another order than rope_store's warp
// (pairs, then warps, then blocks), so results agree with gemv_norm + rope_store to rounding, not bit for bit.
// cos/sin are computed before the PDL wait (pos and inv_freq are the step's inputs: common.cuh's rule), under the
// first weight loads.
#pragma once

#include "gemv.cuh"

namespace vtk {

// Grid (n_units * HD / 16) with n_units = n_heads + 2 n_kv_heads, block 256, cluster (HD / 16): block b serves head
// unit b / (HD / 16) and its warp w the pair p = (b % (HD / 16)) * 8 + w. EARLY as gemv_norm_rows.
template <int M, int HD, class X, bool EARLY>
__device__ __forceinline__ void gemv_norm_rope_rows(const X *__restrict__ xw, const float *__restrict__ ss_part,
                                                    float eps, const bf16 *__restrict__ w,
                                                    const float *__restrict__ bias, X *__restrict__ qkv, int K,
                                                    int n_heads, int n_kv_heads, int vec,
                                                    const int32_t *__restrict__ pos,
                                                    const float *__restrict__ inv_freq, float attn_scale,
                                                    const float *__restrict__ q_norm,
                                                    const float *__restrict__ k_norm,
                                                    const int32_t *__restrict__ slot, X *__restrict__ k_cache,
                                                    X *__restrict__ v_cache) {
  constexpr int kHalf = HD / 2, kBlocks = kHalf / 8;  // blocks (the cluster) per head
  static_assert(kHalf % 8 == 0 && kBlocks >= 1 && kBlocks <= 8, "head_dim 16 to 128");
  pdl_trigger();
  if constexpr (!EARLY) pdl_wait();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int u = int(blockIdx.x) / kBlocks, p = (int(blockIdx.x) % kBlocks) * 8 + warp;
  const int n_rope = n_heads + n_kv_heads, N = (n_rope + n_kv_heads) * HD;
  const bool roped = u < n_rope;
  const float *norm_w = u < n_heads ? q_norm : k_norm;
  const int row = u * HD + p;  // rows row and row + kHalf
  const bf16 *wr[2] = {w + int64_t(row) * K, w + int64_t(row + kHalf) * K};
  float acc[2][M];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;

  ScaledRows<M, X> xs{{xw, K}, ss_part, eps, {}, {}};
  float cos_m = 1.f, sin_m = 0.f;  // lane m < M: token m's, for this warp's pair
  auto prologue = [&] {
    if (roped && lane < M) {
      double s, c;
      sincos(double(pos[lane]) * double(inv_freq[p]), &s, &c);
      cos_m = float(c * attn_scale), sin_m = float(s * attn_scale);
    }
    if constexpr (EARLY) pdl_wait();  // the first weight loads are in flight already
    xs.issue();
  };
  gemv_dot<M, 2>(xs, wr, K, vec, prologue, acc);
  xs.late();

  // y rounded as the q|k|v buffer holds it; lane m keeps token m's pair
  float y0 = 0.f, y1 = 0.f, square = 0.f;
  const float b0 = bias ? bias[row] : 0.f, b1 = bias ? bias[row + kHalf] : 0.f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float s0 = to_f32(from_f32<X>(warp_sum(acc[0][m]) * xs.inv[m] + b0));
    const float s1 = to_f32(from_f32<X>(warp_sum(acc[1][m]) * xs.inv[m] + b1));
    if (lane == m) y0 = s0, y1 = s1, square = fmaf(s1, s1, s0 * s0);
  }

  float inv = 1.f;  // lane m: 1 / rms of token m's head
  if (roped && norm_w) {  // the same for the whole cluster
    __shared__ float block_sum[M];
    const float t = block_rows_sum<M>(square);
    if (threadIdx.x < M) block_sum[threadIdx.x] = t;
    cluster_arrive();  // block_sum is written (release) ...
    cluster_wait();    // ... and every block's is visible (acquire)
    if (lane < M) {
      float t = 0.f;
#pragma unroll
      for (int r = 0; r < kBlocks; ++r) t += cluster_load(&block_sum[lane], unsigned(r));
      inv = 1.f / sqrtf(t / float(HD) + eps);
    }
    cluster_arrive();  // done reading the others' block_sum: they may exit after their cluster_wait below
  }

  if (lane < M) {
    X *out = qkv + int64_t(lane) * N + row;
    const int32_t s = slot[lane];
    X *cache = nullptr;
    if (s >= 0 && u >= n_heads)
      cache = (u < n_rope ? k_cache : v_cache) + int64_t(s) * n_kv_heads * HD +
              int64_t(u < n_rope ? u - n_heads : u - n_rope) * HD + p;
    X lo = from_f32<X>(y0), hi = from_f32<X>(y1);
    if (roped) {
      // rope_head's arithmetic: (e * inv) * w, then the rotation with explicit fmas
      const float a = norm_w ? y0 * inv * norm_w[p] : y0, b = norm_w ? y1 * inv * norm_w[p + kHalf] : y1;
      lo = from_f32<X>(fmaf(a, cos_m, -(b * sin_m)));
      hi = from_f32<X>(fmaf(b, cos_m, a * sin_m));
    }
    out[0] = lo, out[kHalf] = hi;
    if (cache) cache[0] = lo, cache[kHalf] = hi;
  }
  if (roped && norm_w) cluster_wait();  // no block leaves while another may still read its block_sum
}

}  // namespace vtk
