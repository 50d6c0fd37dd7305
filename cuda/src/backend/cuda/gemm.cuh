// Prefill-shaped products, correct first: y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N)) for any M, N, K, with the
// weight in its stored dtype (fp32, fp16 or bf16) widened to fp32 on load and fp32 accumulation. A plain
// shared-memory tiled kernel: a 64×64 output tile per 256-thread block, each thread 4×4 outputs, K in steps
// of 16; out-of-range elements load as 0, so no shape needs padding. It is the fallback for every product the
// decode GEMV does not take (more than 8 rows, or fp32/fp16 weights). cuBLASLt and a tensor-core kernel replace
// it for speed later (see ../shared/DESIGN.md); this one is the reference they are checked against.
#pragma once

#include "common.cuh"

namespace vtk {

constexpr int kGemmBM = 64, kGemmBN = 64, kGemmBK = 16;

template <class X, class W, class Y>
__device__ __forceinline__ void gemm_tile(const X *__restrict__ x, const W *__restrict__ w,
                                          const float *__restrict__ bias, Y *__restrict__ y, int M, int N, int K) {
  __shared__ float xs[kGemmBK][kGemmBM + 4];  // [k][m]
  __shared__ float ws[kGemmBK][kGemmBN + 4];  // [k][n]
  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * kGemmBM, n0 = blockIdx.x * kGemmBN;
  const int tm = (tid / 16) * 4, tn = (tid % 16) * 4;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += kGemmBK) {
    // 64 rows × 16 k of x and of w: 1024 elements each, 4 per thread; 16 consecutive threads read one row's
    // 16 consecutive k.
    for (int i = tid; i < kGemmBM * kGemmBK; i += blockDim.x) {
      const int r = i / kGemmBK, c = i % kGemmBK, gk = k0 + c;
      const int gm = m0 + r, gn = n0 + r;
      xs[c][r] = gm < M && gk < K ? to_f32(x[int64_t(gm) * K + gk]) : 0.f;
      ws[c][r] = gn < N && gk < K ? to_f32(w[int64_t(gn) * K + gk]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kGemmBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = xs[kk][tm + i], b[i] = ws[kk][tn + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int gm = m0 + tm + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int gn = n0 + tn + j;
      if (gn < N) y[int64_t(gm) * N + gn] = from_f32<Y>(acc[i][j] + (bias ? bias[gn] : 0.f));
    }
  }
}

}  // namespace vtk
