// Decode-shaped products with bf16 weights: y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N)), M small (1, 2, 4, 8 per
// launch; the host splits larger M), and the fused SwiGLU product y(M, I) = silu(x · gateᵀ) ⊙ (x · upᵀ) over
// one gate_up(2I, K) matrix. Memory-bound: every weight byte is read once per launch, so the kernel is built
// around streaming w at the bandwidth limit with no fixed cost worth the name:
//   - one block of kGemvThreads (16 warps) per SM, the grid sized from the SM count, alive for the whole
//     launch: no block scheduling after the start, no partial last wave. Work comes in units (a weight row;
//     for SwiGLU gate row n and up row I + n, which produce output n together); block b owns units
//     [b·N/B, (b+1)·N/B) and each of its warps an equal contiguous share of those, so every SM and every warp
//     streams the same bytes to within one unit;
//   - a warp works on R = 2 weight rows at once and issues R × U 16-byte loads per lane (8 bf16 each) before
//     it uses the first: with M <= 2, 8 KB per warp and 128 KB per SM in flight, ~4x what Little's law asks
//     (4.4 TB/s × ~1 µs / 132 SMs ≈ 33 KB), so the SM stays busy while some of its warps do arithmetic or
//     sit at the end of their range; with M >= 4 the loads are smaller and L2 prefetches run ahead (GemvTile);
//   - the weight loads bypass L1 (ld.global.nc.L1::no_allocate): each byte is used once, while x (a few KB to
//     a few hundred KB, read by every warp) stays cached, and each x chunk read serves both rows in hand;
//   - fp32 accumulation in registers, one warp reduction per output at the end of its row.
// Determinism: output (m, n) is summed in one fixed order whatever the launch geometry, M, R or U: lane l
// accumulates chunks l, l + 32, l + 64, ... of the row in that order (each chunk's 8 products in k order),
// then a butterfly over the 32 lanes. So a row of x gets bitwise the same y alone or in any batch, and the
// SwiGLU kernel's gate and up sums are bitwise gemv's (the scalar path below has its own fixed order).
// When K % 8 != 0 (rows not 16-byte aligned) or a pointer is misaligned the host asks for the scalar path
// (vec = 0), which is correct for any shape and slow; real checkpoints never need it.
#pragma once

#include "common.cuh"

namespace vtk {

// Threads per block. Every entry point needs more than 64 registers a thread (ptxas -v: 92 to 128, the cap that
// __launch_bounds__(kGemvThreads, 1) sets), so one block fills over half of an SM's 64K registers, never two
// share an SM, and a grid of one block per SM puts exactly one on each.
constexpr int kGemvThreads = 512;

// Per M: weight rows per warp at once (R), 16-byte chunks per row and lane per batch (U), and how many batches
// ahead the warp prefetches into L2 (D; 0: none). A warp loads a batch into registers, waits, and does its
// arithmetic with nothing of its own in flight. With M = 1 or 2 that arithmetic is short and the other 15
// warps of the SM cover it. With M >= 4 it is long (8 M FMAs per weight pair) and the registers go to the
// accumulators, so prefetches D batches ahead (8 KB per warp) keep DRAM busy instead, holding no register, and
// the loads find their bytes in L2. R × U × 4 registers hold the loads; R × M accumulators and 8 R unpacked
// weights live next to them (ptxas -v: at most 128, no spills).
template <int M> struct GemvTile;
template <> struct GemvTile<1> { static constexpr int R = 2, U = 8, D = 0; };
template <> struct GemvTile<2> { static constexpr int R = 2, U = 8, D = 0; };
template <> struct GemvTile<4> { static constexpr int R = 2, U = 4, D = 2; };
template <> struct GemvTile<8> { static constexpr int R = 2, U = 2, D = 4; };

// 16 bytes of w when `ok`, else zeros without touching memory. The predicate sits inside the asm (volatile, so
// the load is never hoisted above the check that keeps an out-of-range address from being read).
__device__ __forceinline__ uint4 load_stream_if(const uint4 *p, bool ok) {
  uint4 v;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %5, 0;\n\t"
      "@p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n\t"
      "@!p mov.b32 %0, 0;\n\t@!p mov.b32 %1, 0;\n\t@!p mov.b32 %2, 0;\n\t@!p mov.b32 %3, 0;\n\t}"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(int(ok)));
  return v;
}

// Asks L2 for the 16 bytes at p when `ok` (a hint: no data comes back, no register is held).
__device__ __forceinline__ void prefetch_l2_if(const uint4 *p, bool ok) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %1, 0;\n\t@p prefetch.global.L2 [%0];\n\t}" ::"l"(p), "r"(int(ok)));
}

// x[k .. k+8) as fp32 (through L1: every warp of the SM reads the same x).
__device__ __forceinline__ void load_x8(const float *p, float (&f)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4 *>(p)), b = __ldg(reinterpret_cast<const float4 *>(p + 4));
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ __forceinline__ void load_x8(const bf16 *p, float (&f)[8]) {
  unpack_bf16x8(__ldg(reinterpret_cast<const uint4 *>(p)), f);
}

// [begin, end) of part i when `total` items are cut into `parts` contiguous runs whose sizes differ by <= 1.
__device__ __forceinline__ int span_begin(int i, int parts, int total) { return int(int64_t(i) * total / parts); }

// Row r of the pass that starts at unit n: part r % P (0: the row itself or gate, 1: up) of unit n + r / P.
template <int P>
__device__ __forceinline__ int64_t pass_row(int n, int r, int N) {
  return int64_t(n + r / P) + int64_t(r % P) * N;
}

// Batch b of the pass that starts at unit n: chunks 32 (b U + u) + lane, u < U, of each of its R rows; none
// for rows past the warp's last unit u1 or chunks past the row's C. Loaded into wv, or prefetched into L2.
template <int P, int R, int U>
__device__ __forceinline__ void load_batch(uint4 (&wv)[R][U], const uint4 *w16, int n, int b, int u1, int N, int C) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int c = 32 * (b * U + u) + lane;
      wv[r][u] = load_stream_if(w16 + pass_row<P>(n, r, N) * C + c, n + r / P < u1 && c < C);
    }
}
template <int P, int R, int U>
__device__ __forceinline__ void prefetch_batch(const uint4 *w16, int n, int b, int u1, int N, int C) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int c = 32 * (b * U + u) + lane;
      prefetch_l2_if(w16 + pass_row<P>(n, r, N) * C + c, n + r / P < u1 && c < C);
    }
}

__device__ __forceinline__ float silu(float g) { return g / (1.f + expf(-g)); }

// Reduces the pass's accumulators over the warp and stores its outputs (units n .. n + G that exist): P = 1,
// y[m][n] = sum + bias[n] (bias may be null); P = 2, y[m][n] = silu(gate sum) * up sum.
template <int M, int P, int R, class Y>
__device__ __forceinline__ void finish_pass(float (&acc)[R][M], int n, int u1, const float *__restrict__ bias,
                                            Y *__restrict__ y, int N) {
  constexpr int G = R / P;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = warp_sum(acc[r][m]);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (n + g >= u1) break;  // warp-uniform
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (lane == g * M + m) {
        float v;
        if constexpr (P == 1) v = acc[g][m] + (bias ? bias[n + g] : 0.f);
        else v = silu(acc[P * g][m]) * acc[P * g + 1][m];
        y[int64_t(m) * N + n + g] = from_f32<Y>(v);
      }
  }
}

// The warp's units [u0, u1), G = R / P per pass, with 16-byte loads. Batches are numbered t = pass · B + b
// over the warp's whole range, so the prefetch D batches ahead runs on into the next pass's rows.
template <int M, int P, class X, class Y>
__device__ __forceinline__ void gemv_warp_vec(const X *__restrict__ x, const bf16 *__restrict__ w,
                                              const float *__restrict__ bias, Y *__restrict__ y, int K, int N, int u0,
                                              int u1) {
  constexpr int R = GemvTile<M>::R, U = GemvTile<M>::U, D = GemvTile<M>::D, G = R / P;
  const uint4 *w16 = reinterpret_cast<const uint4 *>(w);
  const int lane = threadIdx.x & 31, C = K >> 3, B = (C + 32 * U - 1) / (32 * U);  // chunks, batches per row
  if constexpr (D > 0) {
#pragma unroll 1
    for (int t = 1; t < D; ++t) prefetch_batch<P, R, U>(w16, u0 + t / B * G, t % B, u1, N, C);
  }
  for (int n = u0, t = 0; n < u1; n += G) {
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) acc[r][m] = 0.f;
    for (int b = 0; b < B; ++b, ++t) {
      uint4 wv[R][U];
      load_batch<P>(wv, w16, n, b, u1, N, C);
      if constexpr (D > 0) prefetch_batch<P, R, U>(w16, u0 + (t + D) / B * G, (t + D) % B, u1, N, C);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = 32 * (b * U + u) + lane;
        if (c >= C) break;  // chunks only grow with u; x past the row must not be read
        float wf[R][8];
#pragma unroll
        for (int r = 0; r < R; ++r) unpack_bf16x8(wv[r][u], wf[r]);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          load_x8(x + int64_t(m) * K + int64_t(c) * 8, xf);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r][m] = fmaf(xf[j], wf[r][j], acc[r][m]);
        }
      }
    }
    finish_pass<M, P>(acc, n, u1, bias, y, N);
  }
}

// The same sums element by element, for rows or x that are not 16-byte aligned.
template <int M, int P, int R, class X, class Y>
__device__ __forceinline__ void gemv_warp_scalar(const X *__restrict__ x, const bf16 *__restrict__ w,
                                                 const float *__restrict__ bias, Y *__restrict__ y, int K, int N,
                                                 int u0, int u1) {
  constexpr int G = R / P;
  const int lane = threadIdx.x & 31;
  for (int n = u0; n < u1; n += G) {
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int m = 0; m < M; ++m) acc[r][m] = 0.f;
      if (n + r / P >= u1) continue;  // warp-uniform
      const bf16 *wr = w + pass_row<P>(n, r, N) * K;
      for (int k = lane; k < K; k += 32) {
        const float wk = to_f32(wr[k]);
#pragma unroll
        for (int m = 0; m < M; ++m) acc[r][m] = fmaf(to_f32(x[int64_t(m) * K + k]), wk, acc[r][m]);
      }
    }
    finish_pass<M, P>(acc, n, u1, bias, y, N);
  }
}

// The whole launch: N units of P weight rows each, y (M, N). P = 1: unit n is row n of w, y[m][n] = x[m] · w[n]
// + bias[n]. P = 2 (SwiGLU, bias null): unit n is gate row n and up row N + n of w, y[m][n] = silu(x[m] · w[n]) *
// (x[m] · w[N + n]). Launch: kGemvThreads per block, any grid.
template <int M, int P, class X, class Y>
__device__ __forceinline__ void gemv_units(const X *__restrict__ x, const bf16 *__restrict__ w,
                                           const float *__restrict__ bias, Y *__restrict__ y, int K, int N, int vec) {
  constexpr int R = GemvTile<M>::R;
  static_assert(R % P == 0 && R / P * M <= 32, "one lane per stored output");
  const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int b0 = span_begin(blockIdx.x, gridDim.x, N), b1 = span_begin(blockIdx.x + 1, gridDim.x, N);
  const int u0 = b0 + span_begin(warp, warps, b1 - b0), u1 = b0 + span_begin(warp + 1, warps, b1 - b0);
  if (vec) gemv_warp_vec<M, P>(x, w, bias, y, K, N, u0, u1);
  else gemv_warp_scalar<M, P, R>(x, w, bias, y, K, N, u0, u1);
}

}  // namespace vtk
