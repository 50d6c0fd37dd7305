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

// acc += xf[0 .. 8) · wf[0 .. 8), in that order (every x source sums the same way)
__device__ __forceinline__ void fma8(const float (&xf)[8], const float (&wf)[8], float &acc) {
#pragma unroll
  for (int j = 0; j < 8; ++j) acc = fmaf(xf[j], wf[j], acc);
}

// acc += x[k .. k+8) · wf[0 .. 8) (the fp32 form spells out fma8's order: through an array the fp32 kernels
// compile to other code, and these are the measured ones)
__device__ __forceinline__ void dot8(const float *x, const float (&wf)[8], float &acc) {
  const float4 a = *reinterpret_cast<const float4 *>(x), b = *reinterpret_cast<const float4 *>(x + 4);
  acc = fmaf(a.x, wf[0], acc), acc = fmaf(a.y, wf[1], acc), acc = fmaf(a.z, wf[2], acc), acc = fmaf(a.w, wf[3], acc);
  acc = fmaf(b.x, wf[4], acc), acc = fmaf(b.y, wf[5], acc), acc = fmaf(b.z, wf[6], acc), acc = fmaf(b.w, wf[7], acc);
}
__device__ __forceinline__ void dot8(const bf16 *x, const float (&wf)[8], float &acc) {
  float xf[8];
  unpack_bf16x8(*reinterpret_cast<const uint4 *>(x), xf);
  fma8(xf, wf, acc);
}

// Where a product's activations come from. RowsX: M rows of X in memory (K apart), read through L1. ScaledRows:
// rows of the fused norm's pre-scaled input xw = residual * norm_w (rounded to X, as gemv_warp's kResidualSS left
// them) and each row's 1 / rms, inv[m] = 1 / sqrt(sum of squares / K + eps) from kResidualSS's per-block partial
// sums: the product is then inv[m] * (xw · w), applied to the warp's sums (kScaled) so that the inner loop is the
// plain GEMV's. dot8(m, k, wf, acc): acc += x[m][k .. k+8) · wf; at(m, k): one element (the scalar path).
template <class X>
struct RowsX {
  static constexpr bool kScaled = false;
  const X *__restrict__ x;
  int K;
  __device__ __forceinline__ void dot8(int m, int k, const float (&wf)[8], float &acc) const {
    vtk::dot8(x + int64_t(m) * K + k, wf, acc);
  }
  __device__ __forceinline__ float at(int m, int k) const { return to_f32(x[int64_t(m) * K + k]); }
};

template <int M, class X>
struct ScaledRows : RowsX<X> {
  static constexpr bool kScaled = true;
  static constexpr int kLoads = 8;       // partials a lane loads at a time, per row
  static constexpr bool kLate = M <= 2;  // sum them after the product (their registers stay live through it)
  const float *__restrict__ ss_part;
  float eps;
  float first[kLate ? M : 1][kLoads];  // the first round of a lane's partials, loaded by issue() (kLate)
  float inv[M];                        // set by finish(), from issue() or late()
  // inv[m] from the K / 8 (rounded up) partial sums of squares of each row (ss_part[m][p]), summed by each warp
  // in the same order (lane-strided, then one butterfly), so every warp and every M gets the same bits. issue()
  // loads a lane's first kLoads partials of each row (all of them up to a hidden size of 2048); up to two rows
  // (kLate) it returns then, the warp goes on to the product, and late() sums them (and loads any further rounds)
  // after it, before inv is used, so the partials' L2 round trip runs under the product's instead of before it.
  // With more rows the 8 * M registers would stay live through the product: issue() sums at once. (A dynamic loop
  // of single loads waited out one L2 round trip per 32 partials: measured 6% slower than the norm kernel.)
  __device__ __forceinline__ void issue() {
    if constexpr (kLate) {
      const int lane = threadIdx.x & 31, parts = (this->K + 7) / 8;
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int u = 0; u < kLoads; ++u)
          first[m][u] = lane + 32 * u < parts ? ss_part[int64_t(m) * parts + lane + 32 * u] : 0.f;
    } else {
      finish();
    }
  }
  __device__ __forceinline__ void late() {
    if constexpr (kLate) finish();
  }
  __device__ __forceinline__ void finish() {
    const int lane = threadIdx.x & 31, K = this->K, parts = (K + 7) / 8;
    float ss[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      ss[m] = 0.f;
      if constexpr (kLate)
#pragma unroll
        for (int u = 0; u < kLoads; ++u) ss[m] += first[m][u];
    }
    for (int q0 = kLate ? lane + 32 * kLoads : lane; q0 < parts; q0 += 32 * kLoads) {
      float v[M][kLoads];
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int u = 0; u < kLoads; ++u)
          v[m][u] = q0 + 32 * u < parts ? ss_part[int64_t(m) * parts + q0 + 32 * u] : 0.f;
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int u = 0; u < kLoads; ++u) ss[m] += v[m][u];
    }
#pragma unroll
    for (int m = 0; m < M; ++m) inv[m] = 1.f / sqrtf(warp_sum(ss[m]) / float(K) + eps);
  }
};

// How a warp's sums leave the kernel:
//   kStore:    y[m][n] = dot + bias, rounded to Y (or silu(gate) * up for R = 2);
//   kResidualSS: residual[m][n] += (dot + bias) rounded to Y: the sublayer output as the unfused path stores it,
//              added to the fp32 residual stream as add_rmsnorm_row does, so the fused o_proj / down_proj
//              leave the same bits in the residual (Y only names the rounding); and each block writes the sum of
//              squares of its (8) new residual values per row m to ss_part[m * gridDim.x + blockIdx.x], and
//              xw[m][n] = new value * next_norm_w[n] rounded to XW: what the next product's ScaledRows reads.
enum class GemvOut { kStore, kResidualSS };

struct NoPrologue {
  __device__ void operator()() const {}
};

// Per row m < M, the sum of the block's 8 warps' values v (lane m of each warp holds row m's), in warp order, in
// thread m (threads M .. 255: meaningless). blockDim.x = 256; every thread calls it (a __syncthreads inside).
template <int M>
__device__ __forceinline__ float block_rows_sum(float v) {
  __shared__ float part[8][M];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane < M) part[warp][lane] = v;
  __syncthreads();
  float t = 0.f;
  if (threadIdx.x < M)
#pragma unroll
    for (int i = 0; i < 8; ++i) t += part[i][threadIdx.x];
  return t;
}

// The product loop of gemv_warp (and of the fused q|k|v + RoPE form, gemv_rope.cuh): acc[r][m] += x[m] · row r of
// the warp (wr[r], K bf16 weights), prologue() called once after the first weight loads are issued (see gemv_warp).
template <int M, int R, class XS, class Prologue>
__device__ __forceinline__ void gemv_dot(XS &x, const bf16 *(&wr)[R], int K, int vec, Prologue &prologue,
                                         float (&acc)[R][M]) {
  constexpr int U = (M <= 2 ? 8 : 4) / R;  // 16-byte weight loads in flight per lane and row
  static_assert(U >= 1 && U * R == (M <= 2 ? 8 : 4), "loads in flight must be a multiple of R");
  const int lane = threadIdx.x & 31;
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
          for (int m = 0; m < M; ++m) x.dot8(m, k, wf, acc[r][m]);
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
        for (int m = 0; m < M; ++m) x.dot8(m, c * 8, wf, acc[r][m]);
      }
    }
  } else {
    prologue();
    for (int k = lane; k < K; k += 32)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float wk = to_f32(wr[r][k]);
#pragma unroll
        for (int m = 0; m < M; ++m) acc[r][m] = fmaf(x.at(m, k), wk, acc[r][m]);
      }
  }
}

// R weight rows per warp: R = 1 is the plain GEMV (row n); R = 2 is the SwiGLU GEMV over a gate|up matrix of
// 2N rows (warp n reads gate row n and up row N + n and writes silu(gate) * up). Every output is summed in the
// same order whatever M is (lane l takes chunks l, l + 32, ... in order, then one butterfly), so a row gives
// the same bits alone or in a batch, and the SwiGLU sums equal the plain GEMV's. Called after pdl_wait().
// prologue(): what each warp does after it has issued its first weight loads and before x is read (the PDL
// wait of the EARLY forms, the fused norm's partial sums: they then run under the loads' DRAM latency); every
// thread calls it, so with one (or with kResidualSS's block-wide sum) the warps past the last row stay (reading
// a valid row, storing nothing). Otherwise they return at once.
// x: the activations' source (RowsX or ScaledRows), read only after prologue(); a ScaledRows' late() runs after
// the product (its sums of squares, when issue() left them to it) and its inv[m] scales the row's sums before the
// bias.
// 16-byte weight loads in flight per lane: 8 (all rows of the warp together) up to two batch rows, 4 above. (4 or
// 16 at batch 1 measured 0.99-1.01x on both shapes: bench/RESULTS.md session 6.)
template <int M, int R, class Y, GemvOut OUT = GemvOut::kStore, class XS, class Prologue = NoPrologue,
          class XW = float>
__device__ __forceinline__ void gemv_warp(XS &x, const bf16 *__restrict__ w, const float *__restrict__ bias,
                                          Y *__restrict__ y, int K, int N, int vec,
                                          float *__restrict__ residual = nullptr, Prologue prologue = {},
                                          float *__restrict__ ss_part = nullptr,
                                          const float *__restrict__ next_norm_w = nullptr,
                                          XW *__restrict__ xw = nullptr) {
  // Every warp stays to the end when the block syncs: for the prologue's and kResidualSS's block-wide steps.
  constexpr bool kStay = !std::is_same_v<Prologue, NoPrologue> || OUT == GemvOut::kResidualSS;
  const int lane = threadIdx.x & 31;
  const int n = int(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);  // this warp's output row
  if (!kStay && n >= N) return;
  const bf16 *wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + (int64_t(min(n, N - 1)) + int64_t(r) * N) * K;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;

  gemv_dot<M, R>(x, wr, K, vec, prologue, acc);

  if constexpr (XS::kScaled) x.late();
  const float b = bias && n < N ? bias[n] : 0.f;
  float square = 0.f;  // kResidualSS: lane m's new residual value, squared
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      s[r] = warp_sum(acc[r][m]);
      if constexpr (XS::kScaled) s[r] *= x.inv[m];
    }
    if (lane == m && n < N) {
      if constexpr (OUT == GemvOut::kResidualSS) {
        float &res = residual[int64_t(m) * N + n];
        const float v = res + to_f32(from_f32<Y>(s[0] + b));
        res = v;
        square = v * v;
        xw[int64_t(m) * N + n] = from_f32<XW>(v * next_norm_w[n]);
      } else if constexpr (R == 1) {
        y[int64_t(m) * N + n] = from_f32<Y>(s[0] + b);
      } else {
        const float g = s[0], u = s[R - 1];
        y[int64_t(m) * N + n] = from_f32<Y>(g / (1.f + expf(-g)) * u);
      }
    }
  }
  if constexpr (OUT == GemvOut::kResidualSS) {  // the block's partial per row
    const float t = block_rows_sum<M>(square);
    if (threadIdx.x < M) ss_part[int64_t(threadIdx.x) * gridDim.x + blockIdx.x] = t;
  }
}

// The plain entry: launched with PDL (Ops::gemv), a warp may start while the previous kernel still runs; it
// waits before reading x. (Prefetching weights into L2 before the wait measured slower on the H200: the whole
// row cost the 8B decode step 20%, the first batch of loads 6%; bench/RESULTS.md.)
//
// EARLY (the *_early entry points, which Ops launches under PDL): each warp issues
// its first weight loads into registers before the wait instead (weights are never written by a kernel, so
// they may be read while the previous one runs), so that the blocks that become resident during the previous
// kernel's tail keep the memory system busy; unlike the L2 prefetch above, no byte is requested twice. On the
// H200 at batch 1: +17% on the Qwen3-0.6B shape, +6% on 8B (bench/RESULTS.md). A separate instantiation,
// because the branch in one kernel raised the plain GEMV from 36 to 56 registers for everyone.
template <int M, int R, class X, class Y, GemvOut OUT = GemvOut::kStore, bool EARLY = false>
__device__ __forceinline__ void gemv_rows(const X *__restrict__ x, const bf16 *__restrict__ w,
                                          const float *__restrict__ bias, Y *__restrict__ y, int K, int N, int vec,
                                          float *__restrict__ residual = nullptr,
                                          float *__restrict__ ss_part = nullptr,
                                          const float *__restrict__ next_norm_w = nullptr,
                                          X *__restrict__ xw = nullptr) {
  pdl_trigger();
  RowsX<X> xs{x, K};
  if constexpr (EARLY) {
    gemv_warp<M, R, Y, OUT>(xs, w, bias, y, K, N, vec, residual, [] { pdl_wait(); }, ss_part, next_norm_w, xw);
  } else {
    pdl_wait();
    gemv_warp<M, R, Y, OUT>(xs, w, bias, y, K, N, vec, residual, NoPrologue{}, ss_part, next_norm_w, xw);
  }
}

// The RMSNorm fused into the products around it (the decode step's q|k|v and gate|up; the default at up to 8 rows,
// the separate kernels were its null control; 1.12x on the Qwen3-8B shape at batch 1): the GEMV before it (o / down,
// kResidualSS) adds into the residual and leaves each row's sum of squares as per-block partials and the row times the
// norm weight (xw, rounded to X). Each warp here loads the partials (one L2 read, issued after its first weight loads
// and summed after its product: ScaledRows), runs the plain GEMV's loop over xw and scales its sums by 1 / rms:
// rmsnorm(r) * g · w = inv * ((r * g) · w). No norm kernel between the products, no block-wide pass, and the inner loop
// reads 2 bytes of x per element like the plain one (up to rounding: xw is rounded before the scale, the norm kernel's
// output after it).
// Earlier forms, measured on the H200 at batch 1 (bench/RESULTS.md, sessions 4-5): the residual normalized as it is
// read (8 bytes of x per element: fp32 residual and norm weight) 0.89x on the Qwen3-0.6B shape, 1.015x on 8B; the
// normed rows staged in shared memory per block 0.954x on 0.6B; the add + norm done once, in the last block of the
// o/down GEMV (a ticket counter), 0.93x. Leaving the two norm launches out altogether (VT_CUDA_SKIP=norm, wrong
// results) gives 1.20x on 0.6B: what a free fused norm would be worth.
template <int M, int R, class X, bool EARLY = false>
__device__ __forceinline__ void gemv_norm_rows(const X *__restrict__ xw, const float *__restrict__ ss_part, float eps,
                                               const bf16 *__restrict__ w, const float *__restrict__ bias,
                                               X *__restrict__ y, int K, int N, int vec) {
  pdl_trigger();
  if constexpr (!EARLY) pdl_wait();
  ScaledRows<M, X> xs{{xw, K}, ss_part, eps, {}, {}};
  gemv_warp<M, R, X>(xs, w, bias, y, K, N, vec, nullptr, [&] {
    if constexpr (EARLY) pdl_wait();  // the first weight loads are in flight already (gemv_rows' EARLY)
    xs.issue();
  });
}

// The last layer's norm folded into the lm_head (the captured decode step's):
// logits y (fp32) = inv * (xw · wᵀ) from the last down_proj's xw and partials, as gemv_norm_rows; no bias (the lm_head
// has none). One launch fewer than the norm kernel + lm_head GEMV. Block 0 also writes the normed rows, final_rows(M,
// K) fp32 = residual * inv * norm_w, what that norm kernel leaves (its inv summed in another order), for a later
// lm_head over gathered rows (head_of); after block 0's product, and ready for the next kernel once its PDL wait
// returns (the whole grid has finished then).
template <int M, class X, bool EARLY = false>
__device__ __forceinline__ void gemv_norm_head_rows(const X *__restrict__ xw, const float *__restrict__ ss_part,
                                                    float eps, const bf16 *__restrict__ w, float *__restrict__ y,
                                                    int K, int N, int vec, const float *__restrict__ residual,
                                                    const float *__restrict__ norm_w, float *__restrict__ final_rows) {
  pdl_trigger();
  if constexpr (!EARLY) pdl_wait();
  ScaledRows<M, X> xs{{xw, K}, ss_part, eps, {}, {}};
  gemv_warp<M, 1, float>(xs, w, nullptr, y, K, N, vec, nullptr, [&] {
    if constexpr (EARLY) pdl_wait();
    xs.issue();
  });
  if (blockIdx.x == 0)
#pragma unroll
    for (int m = 0; m < M; ++m)
      for (int k = threadIdx.x; k < K; k += blockDim.x)
        final_rows[int64_t(m) * K + k] = residual[int64_t(m) * K + k] * xs.inv[m] * norm_w[k];
}

}  // namespace vtk
