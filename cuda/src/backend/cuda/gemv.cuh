// Decode-shaped products with bf16 weights: y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N)), M small (1, 2, 4, 8 per
// launch; the host splits larger M), and the SwiGLU form over a fused gate|up matrix (gemv_rows, R = 2).
// (Session 2 tried one resident 512-thread block per SM with balanced row ranges: on the H200 it ran slower
// on every shape, 57-86 % of the copy rate against 75-80 % for this layout; bench/cuda-ops.md.) Memory-bound: every weight byte is read once per launch, so the kernel is
// built around streaming w at the bandwidth limit:
//   - one warp per output row n; each lane reads 16 bytes (8 bf16) of the row per access, so a warp covers
//     512 contiguous bytes, and U such accesses are issued before the first is used (U × 16 bytes in flight
//     per lane) to cover the memory latency;
//   - the weight loads bypass L1 (ld.global.nc.L1::no_allocate): each byte is used once, while x (a few KB,
//     read by every warp) stays cached;
//   - fp32 accumulation in registers, one warp reduction per output at the end.
// When K % 8 != 0 (rows not 16-byte aligned) or a pointer is misaligned the host asks for the scalar path
// (vec = 0), which is correct for any shape and slow; real checkpoints never need it.
#pragma once

#include <type_traits>

#include "common.cuh"

namespace vtk {

// acc += x[k .. k+8) · wf[0 .. 8)
__device__ __forceinline__ void dot8(const float *x, const float (&wf)[8], float &acc) {
  const float4 a = *reinterpret_cast<const float4 *>(x), b = *reinterpret_cast<const float4 *>(x + 4);
  acc = fmaf(a.x, wf[0], acc), acc = fmaf(a.y, wf[1], acc), acc = fmaf(a.z, wf[2], acc), acc = fmaf(a.w, wf[3], acc);
  acc = fmaf(b.x, wf[4], acc), acc = fmaf(b.y, wf[5], acc), acc = fmaf(b.z, wf[6], acc), acc = fmaf(b.w, wf[7], acc);
}
__device__ __forceinline__ void dot8(const bf16 *x, const float (&wf)[8], float &acc) {
  float xf[8];
  unpack_bf16x8(*reinterpret_cast<const uint4 *>(x), xf);
#pragma unroll
  for (int j = 0; j < 8; ++j) acc = fmaf(xf[j], wf[j], acc);
}

// How a warp's sums leave the kernel:
//   kStore:    y[m][n] = dot + bias, rounded to Y (or silu(gate) * up for R = 2);
//   kResidual: residual[m][n] += (dot + bias) rounded to Y: the sublayer output as the unfused path stores it,
//              added to the fp32 residual stream as add_rmsnorm_row does, so the fused o_proj / down_proj
//              leave the same bits in the residual (y is the fp32 residual; Y only names the rounding).
enum class GemvOut { kStore, kResidual };

struct NoPrologue {
  __device__ void operator()() const {}
};

// R weight rows per warp: R = 1 is the plain GEMV (row n); R = 2 is the SwiGLU GEMV over a gate|up matrix of
// 2N rows (warp n reads gate row n and up row N + n and writes silu(gate) * up). Every output is summed in the
// same order whatever M is (lane l takes chunks l, l + 32, ... in order, then one butterfly), so a row gives
// the same bits alone or in a batch, and the SwiGLU sums equal the plain GEMV's. Called after pdl_wait().
// prologue(): work the whole block does after each warp has issued its first weight loads and before x is
// read (the fused RMSNorm: it then runs under the loads' DRAM latency); every thread calls it, so with one
// the warps past the last row stay (reading a valid row, storing nothing). Without one they return at once.
// group: which blockDim.x / 32 rows this block computes (blockIdx.x, or a grid-stride loop's index).
template <int M, int R, class X, class Y, GemvOut OUT = GemvOut::kStore, class Prologue = NoPrologue>
__device__ __forceinline__ void gemv_warp(const X *__restrict__ x, const bf16 *__restrict__ w,
                                          const float *__restrict__ bias, Y *__restrict__ y, int K, int N, int vec,
                                          float *__restrict__ residual = nullptr, Prologue prologue = {},
                                          int group = -1) {
  constexpr int U = (M <= 2 ? 8 : 4) / R;  // 16-byte weight loads in flight per lane and row
  constexpr bool kPrologue = !std::is_same_v<Prologue, NoPrologue>;
  const int lane = threadIdx.x & 31;
  const int n = (group < 0 ? int(blockIdx.x) : group) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (!kPrologue && n >= N) return;
  const bf16 *wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + (int64_t(min(n, N - 1)) + int64_t(r) * N) * K;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;

  if (vec) {
    const int chunks = K / 8;  // 16-byte chunks per row
    int c = lane;
    uint4 wv[R][U];
    // U chunks per row and lane are loaded, then used while the next U load (loads issued before the prologue)
    bool full = c + 32 * (U - 1) < chunks;
    if (full)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u) wv[r][u] = load_stream(reinterpret_cast<const uint4 *>(wr[r]) + c + 32 * u);
    prologue();
    while (full) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = (c + 32 * u) * 8;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float wf[8];
          unpack_bf16x8(wv[r][u], wf);
#pragma unroll
          for (int m = 0; m < M; ++m) dot8(x + int64_t(m) * K + k, wf, acc[r][m]);
        }
      }
      c += 32 * U;
      full = c + 32 * (U - 1) < chunks;
      if (full)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int u = 0; u < U; ++u) wv[r][u] = load_stream(reinterpret_cast<const uint4 *>(wr[r]) + c + 32 * u);
    }
    for (; c < chunks; c += 32) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float wf[8];
        unpack_bf16x8(load_stream(reinterpret_cast<const uint4 *>(wr[r]) + c), wf);
#pragma unroll
        for (int m = 0; m < M; ++m) dot8(x + int64_t(m) * K + c * 8, wf, acc[r][m]);
      }
    }
  } else {
    prologue();
    for (int k = lane; k < K; k += 32)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float wk = to_f32(wr[r][k]);
#pragma unroll
        for (int m = 0; m < M; ++m) acc[r][m] = fmaf(to_f32(x[int64_t(m) * K + k]), wk, acc[r][m]);
      }
  }

  const float b = bias && n < N ? bias[n] : 0.f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) s[r] = warp_sum(acc[r][m]);
    if (lane == m && n < N) {
      if constexpr (OUT == GemvOut::kResidual) {
        float &res = residual[int64_t(m) * N + n];
        res = res + to_f32(from_f32<Y>(s[0] + b));
      } else if constexpr (R == 1) {
        y[int64_t(m) * N + n] = from_f32<Y>(s[0] + b);
      } else {
        const float g = s[0], u = s[R - 1];
        y[int64_t(m) * N + n] = from_f32<Y>(g / (1.f + expf(-g)) * u);
      }
    }
  }
}

// The plain entry: launched with PDL (Ops::gemv), a warp may start while the previous kernel still runs; it
// waits before reading x. (Prefetching weights into L2 before the wait measured slower on the H200: the whole
// row cost the 8B decode step 20%, the first batch of loads 6%; bench/RESULTS.md.)
//
// EARLY (the *_early entry points, which Ops launches under PDL unless VT_CUDA_EARLY_LOADS=0): each warp issues
// its first weight loads into registers before the wait instead (weights are never written by a kernel, so
// they may be read while the previous one runs), so that the blocks that become resident during the previous
// kernel's tail keep the memory system busy; unlike the L2 prefetch above, no byte is requested twice. On the
// H200 at batch 1: +17% on the Qwen3-0.6B shape, +6% on 8B (bench/RESULTS.md). A separate instantiation,
// because the branch in one kernel raised the plain GEMV from 36 to 56 registers for everyone.
template <int M, int R, class X, class Y, GemvOut OUT = GemvOut::kStore, bool EARLY = false>
__device__ __forceinline__ void gemv_rows(const X *__restrict__ x, const bf16 *__restrict__ w,
                                          const float *__restrict__ bias, Y *__restrict__ y, int K, int N, int vec,
                                          float *__restrict__ residual = nullptr) {
  pdl_trigger();
  if constexpr (EARLY) {
    gemv_warp<M, R, X, Y, OUT>(x, w, bias, y, K, N, vec, residual, [] { pdl_wait(); });
  } else {
    pdl_wait();
    gemv_warp<M, R, X, Y, OUT>(x, w, bias, y, K, N, vec, residual);
  }
}

// The RMSNorm fused in front of a product (the decode step's q|k|v and gate|up): every block first writes
// rmsnorm(residual row m) * norm_w, rounded to X, for its M rows into shared memory (xs, M * K elements), then
// runs the product on it. The values are rmsnorm_row's bit for bit (the same 256-thread strided sums and
// block_sum, the same expression), so the fused step computes what the separate norm kernel + GEMV did, without
// the norm's launch and its round trip through memory; each block re-reads the K fp32 residual values and the
// norm weights from L2 (together half the bytes of its weight rows), as gemv_warp's prologue: after its warps
// issued their first weight loads, so that the L2 reads overlap the DRAM latency. (Run before those loads, the
// fused step measured 2.4% slower than the separate kernels on the 8B shape at batch 1, 0.9% faster on 0.6B;
// after them, with one block per row group, 6% slower on 8B and 3.4% faster on 0.6B: at 56 registers four
// blocks fit an SM, so 8B's 1536 gate|up groups ran in three waves, each paying the prologue. Hence the
// resident-sized grid below.) Running the add + norm once instead, in the last block of the o/down GEMV before it
// (a ticket counter: every block fences its outputs and takes a ticket, the last reads them all), measured 7%
// slower on 0.6B and the same on 8B: that block's fence, ticket and two passes over the row cost more in series
// than the separate norm kernel, whose launch PDL hides.
template <int M, class X>
__device__ __forceinline__ void rmsnorm_to_shared(const float *__restrict__ residual, const float *__restrict__ norm_w,
                                                  float eps, int K, X *xs) {
#pragma unroll 1
  for (int m = 0; m < M; ++m) {
    const float *r = residual + int64_t(m) * K;
    float ss = 0.f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      const float v = r[i];
      ss += v * v;
    }
    const float inv = 1.f / sqrtf(block_sum(ss) / float(K) + eps);
    for (int i = threadIdx.x; i < K; i += blockDim.x) xs[int64_t(m) * K + i] = from_f32<X>(r[i] * inv * norm_w[i]);
  }
  __syncthreads();
}

template <int M, int R, class X, bool EARLY = false>
__device__ __forceinline__ void gemv_norm_rows(const float *__restrict__ residual, const float *__restrict__ norm_w,
                                               float eps, const bf16 *__restrict__ w, const float *__restrict__ bias,
                                               X *__restrict__ y, int K, int N, int vec) {
  extern __shared__ uint4 gemv_smem[];  // 16-byte aligned, as the vector path's x loads need
  X *xs = reinterpret_cast<X *>(gemv_smem);
  pdl_trigger();
  if constexpr (!EARLY) pdl_wait();
  // Launched with at most as many blocks as are resident at once (Ops::gemv_norm), each block normalizes once
  // and then takes row groups blockIdx.x, + gridDim.x, ...: the prologue is not paid again by later waves.
  const int groups = (N + (blockDim.x >> 5) - 1) / (blockDim.x >> 5);
  gemv_warp<M, R, X, X>(xs, w, bias, y, K, N, vec, nullptr, [&] {
    if constexpr (EARLY) pdl_wait();  // the first weight loads are in flight already (gemv_rows' EARLY)
    rmsnorm_to_shared<M, X>(residual, norm_w, eps, K, xs);
  });
  for (int g = blockIdx.x + gridDim.x; g < groups; g += gridDim.x)
    gemv_warp<M, R, X, X>(xs, w, bias, y, K, N, vec, nullptr, NoPrologue{}, g);
}

}  // namespace vtk
