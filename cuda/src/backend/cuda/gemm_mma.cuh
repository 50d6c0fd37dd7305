// Tensor-core GEMM on mma.sync (sm_80 and newer: Ampere, Ada, Hopper, Blackwell; what the GB10 runs):
// y(M, N) = x(M, K) · w(N, K)ᵀ with x and w bf16, fp32 accumulation, and the model layer's epilogues:
//   - plain: y in bf16 or fp32, plus an fp32 bias(N) when given;
//   - SwiGLU: w is a gate|up layer (2I, K), gate rows [0, I), up rows [I, 2I); y(M, I) = silu(x·gateᵀ) ⊙ (x·upᵀ)
//     in bf16, silu(g) = g / (1 + exp(-g)) on the fp32 sums (as gemv_swiglu), rounded once at the store.
// Any M, N, K with K % 8 == 0 and 16-byte aligned x and w (16-byte cp.async chunks; the host checks and sends
// anything else to the tiled gemm.cuh). Rows and columns past the edges load as zeros, so no shape needs padding.
//
// Structure (the shape of the kernels a later weight format reuses: only load_w_tile changes):
//   - a block computes a BM x BN tile of y over its share of K, ST stages deep: while one BK slice is multiplied,
//     the next ST - 1 are in flight (cp.async, zero-filled past the edges);
//   - WM x WN warps, each a (BM / WM) x (BN / WN) piece as MI x NI m16n8k16 products per 16-wide k step; operands
//     reach registers through ldmatrix from rows padded by 16 bytes (conflict-free, as attention_prefill.cuh's);
//   - SwiGLU loads the weight tile's 8-row groups alternately from gate and up rows (group 2j: gate rows c .. c+7,
//     group 2j+1: up rows c .. c+7), so a thread holds gate and up sums of the same output in n tiles 2j and 2j+1;
//   - split-K (gridDim.z > 1): each split adds up its K range and writes its fragments (fp32) to a workspace; the
//     split that arrives last at the tile's ticket adds the splits in order 0, 1, ... (the same sum whichever came
//     last) and applies the epilogue, then puts the ticket back to 0, so calls of any shape can share the tickets.
//     This is what fills the GPU when N·K is small against the SM count (batched decode).
#pragma once

#include "common.cuh"
#include "tensor_core.cuh"

namespace vtk {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int ST_>
struct MmaTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, ST = ST_;
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int TM = BM / WM, TN = BN / WN;  // one warp's piece
  static constexpr int MI = TM / 16, NI = TN / 8;   // its m16 and n8 tiles
  static constexpr int LD = BK + 8;                 // a shared-memory row, in bf16: 16 bytes of padding
  static constexpr int kStageElems = (BM + BN) * LD;
  static constexpr int kSmemBytes = ST * kStageElems * 2;
  static constexpr int kFrag = MI * NI * 4;  // accumulators per thread
  static_assert(TM % 16 == 0 && TN % 16 == 0 && BK % 16 == 0 && ST >= 2, "tile geometry");
};

// Workspace a split-K launch needs: splits x tiles x (kThreads x kFrag) fp32.
template <class C>
__host__ __device__ constexpr long long mma_split_floats(int tiles, int splits) {
  return (long long)tiles * splits * C::kThreads * C::kFrag;
}

// Rows [m0, m0 + BM) of x, k [k0, k0 + BK), into sx (BM x LD).
template <class C>
__device__ __forceinline__ void load_x_tile(uint32_t sx, const bf16 *__restrict__ x, int M, int K, int m0, int k0) {
  constexpr int kChunks = C::BK / 8, kTotal = C::BM * kChunks;
#pragma unroll
  for (int i = 0; i < (kTotal + C::kThreads - 1) / C::kThreads; ++i) {
    const int c = int(threadIdx.x) + i * C::kThreads;
    if (kTotal % C::kThreads != 0 && c >= kTotal) break;
    const int r = c / kChunks, kc = c % kChunks, gm = m0 + r, gk = k0 + kc * 8;
    const bool ok = gm < M && gk < K;
    cp_async16_zfill(sx + uint32_t(r * C::LD + kc * 8) * 2, ok ? x + (long long)gm * K + gk : x, ok);
  }
}

// The weight tile's BN rows, k [k0, k0 + BK), into sw (BN x LD): rows n0 .. n0 + BN - 1, or for SwiGLU the gate and
// up rows of outputs n0 / 2 .. n0 / 2 + BN / 2 - 1 in alternating groups of 8 (see the top of the file).
template <class C, bool kSwiGLU>
__device__ __forceinline__ void load_w_tile(uint32_t sw, const bf16 *__restrict__ w, int N, int K, int n0, int k0) {
  constexpr int kChunks = C::BK / 8, kTotal = C::BN * kChunks;
#pragma unroll
  for (int i = 0; i < (kTotal + C::kThreads - 1) / C::kThreads; ++i) {
    const int c = int(threadIdx.x) + i * C::kThreads;
    if (kTotal % C::kThreads != 0 && c >= kTotal) break;
    const int r = c / kChunks, kc = c % kChunks, gk = k0 + kc * 8;
    int gn;
    bool ok;
    if constexpr (kSwiGLU) {
      const int I = N / 2, grp = r >> 3, out = n0 / 2 + (grp >> 1) * 8 + (r & 7);
      gn = (grp & 1) * I + out;
      ok = out < I;
    } else {
      gn = n0 + r;
      ok = gn < N;
    }
    ok = ok && gk < K;
    cp_async16_zfill(sw + uint32_t(r * C::LD + kc * 8) * 2, ok ? w + (long long)gn * K + gk : w, ok);
  }
}

// One BK slice of the stage at sx / sw into the warp's accumulators.
template <class C>
__device__ __forceinline__ void mma_slice(float (&acc)[C::MI][C::NI][4], uint32_t sx, uint32_t sw, int wm, int wn) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < C::BK / 16; ++kk) {
    uint32_t a[C::MI][4], b[C::NI][2];
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi) {
      const int row = wm * C::TM + mi * 16 + (lane & 15), col = kk * 16 + (lane >> 4) * 8;
      ldmatrix_x4(a[mi], sx + uint32_t(row * C::LD + col) * 2);
    }
#pragma unroll
    for (int nj = 0; nj < C::NI / 2; ++nj) {
      const int row = wn * C::TN + nj * 16 + (lane & 7) + ((lane >> 4) << 3), col = kk * 16 + ((lane >> 3) & 1) * 8;
      uint32_t r[4];
      ldmatrix_x4(r, sw + uint32_t(row * C::LD + col) * 2);
      b[2 * nj][0] = r[0], b[2 * nj][1] = r[1], b[2 * nj + 1][0] = r[2], b[2 * nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni) mma_bf16(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
  }
}

// SwiGLU on the fp32 sums: silu(gate) * up, silu(g) = g / (1 + exp(-g)) (with __expf; gemv_swiglu uses expf).
__device__ __forceinline__ float swiglu(float gate, float up) { return gate / (1.f + __expf(-gate)) * up; }

template <class Y>
__device__ __forceinline__ void store_pair(Y *__restrict__ y, long long at, bool both, bool paired, float v0, float v1) {
  if constexpr (sizeof(Y) == 4) {
    if (paired) {
      *reinterpret_cast<float2 *>(y + at) = make_float2(v0, v1);
      return;
    }
  } else {
    if (paired) {
      *reinterpret_cast<uint32_t *>(y + at) = bf16x2_from_f32(v0, v1);
      return;
    }
  }
  y[at] = from_f32<Y>(v0);
  if (both) y[at + 1] = from_f32<Y>(v1);
}

template <class C, class Y, bool kSwiGLU>
__device__ __forceinline__ void mma_epilogue(const float (&acc)[C::MI][C::NI][4], const float *__restrict__ bias,
                                             Y *__restrict__ y, int M, int N, int m0, int n0, int wm, int wn) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  if constexpr (kSwiGLU) {
    const int I = N / 2;
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int j = 0; j < C::NI / 2; ++j) {
        const int col = n0 / 2 + (wn * C::NI / 2 + j) * 8 + 2 * t;
        if (col >= I) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + wm * C::TM + mi * 16 + g + 8 * h;
          if (row >= M) continue;
          float v[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) v[e] = swiglu(acc[mi][2 * j][2 * h + e], acc[mi][2 * j + 1][2 * h + e]);
          store_pair(y, (long long)row * I + col, col + 1 < I, (I & 1) == 0 && col + 1 < I, v[0], v[1]);
        }
      }
  } else {
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni) {
        const int col = n0 + wn * C::TN + ni * 8 + 2 * t;
        if (col >= N) continue;
        const float b0 = bias ? bias[col] : 0.f, b1 = bias && col + 1 < N ? bias[col + 1] : 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + wm * C::TM + mi * 16 + g + 8 * h;
          if (row < M)
            store_pair(y, (long long)row * N + col, col + 1 < N, (N & 1) == 0 && col + 1 < N,
                       acc[mi][ni][2 * h] + b0, acc[mi][ni][2 * h + 1] + b1);
        }
      }
  }
}

// grid (n tiles, m tiles, splits), C::kThreads threads, C::kSmemBytes of dynamic shared memory. For SwiGLU N is
// the weight's rows (2I) and a tile covers BN / 2 outputs. ws / tickets: split-K's (unused when gridDim.z == 1).
template <class C, class Y, bool kSwiGLU>
__device__ __forceinline__ void gemm_mma(const bf16 *__restrict__ x, const bf16 *__restrict__ w,
                                         const float *__restrict__ bias, Y *__restrict__ y, int M, int N, int K,
                                         float *__restrict__ ws, int *__restrict__ tickets) {
  extern __shared__ uint4 gemm_smem[];
  const uint32_t smem = smem_addr(gemm_smem);
  const int warp = threadIdx.x >> 5, wm = warp / C::WN, wn = warp % C::WN;
  const int m0 = blockIdx.y * C::BM, n0 = blockIdx.x * C::BN;
  const int splits = gridDim.z, z = blockIdx.z;
  const int kb_all = (K + C::BK - 1) / C::BK, kb_per = (kb_all + splits - 1) / splits;
  const int kb0 = z * kb_per, kb1 = min(kb_all, kb0 + kb_per);
  const int nkb = max(kb1 - kb0, 0);

  float acc[C::MI][C::NI][4];
#pragma unroll
  for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

  auto stage_x = [&](int s) { return smem + uint32_t(s * C::kStageElems) * 2; };
  auto stage_w = [&](int s) { return smem + uint32_t(s * C::kStageElems + C::BM * C::LD) * 2; };
  // Under programmatic dependent launch the first stages' weight slices are in flight before the wait (no kernel
  // of a step writes weights), so they stream in under the previous kernel's tail; x, the workspace and y only
  // after it. (The first commit group holds them all, so the first wait covers every early slice.)
  pdl_trigger();
#pragma unroll
  for (int s = 0; s < C::ST - 1; ++s)
    if (s < nkb) load_w_tile<C, kSwiGLU>(stage_w(s), w, N, K, n0, (kb0 + s) * C::BK);
  pdl_wait();
#pragma unroll
  for (int s = 0; s < C::ST - 1; ++s) {
    if (s < nkb) load_x_tile<C>(stage_x(s), x, M, K, m0, (kb0 + s) * C::BK);
    cp_async_commit();
  }
  for (int i = 0; i < nkb; ++i) {
    cp_async_wait<C::ST - 2>();  // slice i has landed (this thread's part) ...
    __syncthreads();             // ... everyone's, and slice i - 1's stage is free again
    const int next = i + C::ST - 1;
    if (next < nkb) {
      load_x_tile<C>(stage_x(next % C::ST), x, M, K, m0, (kb0 + next) * C::BK);
      load_w_tile<C, kSwiGLU>(stage_w(next % C::ST), w, N, K, n0, (kb0 + next) * C::BK);
    }
    cp_async_commit();
    mma_slice<C>(acc, stage_x(i % C::ST), stage_w(i % C::ST), wm, wn);
  }
  cp_async_wait<0>();

  if (splits > 1) {
    // Each thread's fragments, as float4s, in the (tile, split)'s block at (fragment, thread): a warp's stores and
    // loads of one fragment are 512 contiguous bytes. The last split of the tile adds them up.
    // Fragments whose rows (g and g + 8 of a 16-row block) all lie past M are neither written nor read.
    const int tile = blockIdx.y * gridDim.x + blockIdx.x, g = (threadIdx.x & 31) >> 2;
    auto live = [&](int mi) { return m0 + wm * C::TM + mi * 16 + g < M; };
    float4 *mine = reinterpret_cast<float4 *>(ws) + (long long)(tile * splits + z) * C::kThreads * (C::kFrag / 4) + threadIdx.x;
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni)
        if (live(mi))
          __stcg(mine + (mi * C::NI + ni) * C::kThreads,
               make_float4(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]));
    __syncthreads();
    __shared__ int last;
    if (threadIdx.x == 0) last = split_ticket(tickets + tile) == splits - 1;
    __syncthreads();
    if (!last) return;
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float4 *part = reinterpret_cast<const float4 *>(ws) + (long long)(tile * splits + s) * C::kThreads * (C::kFrag / 4) + threadIdx.x;
#pragma unroll
      for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < C::NI; ++ni) {
          if (!live(mi)) continue;
          const float4 p = __ldcg(part + (mi * C::NI + ni) * C::kThreads);
          acc[mi][ni][0] += p.x, acc[mi][ni][1] += p.y, acc[mi][ni][2] += p.z, acc[mi][ni][3] += p.w;
        }
    }
    if (threadIdx.x == 0) tickets[tile] = 0;
  }
  mma_epilogue<C, Y, kSwiGLU>(acc, bias, y, M, N, m0, n0, wm, wn);
}

}  // namespace vtk
