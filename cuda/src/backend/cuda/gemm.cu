// Entry points of the gemm family: vt_gemm_<x dtype>_<w dtype>_<y dtype>, grid (ceil(N / 64), ceil(M / 64)),
// block 256.
#include "gemm.cuh"

using namespace vtk;

#define VT_GEMM(XS, X, WS, W, YS, Y)                                                                        \
  extern "C" __global__ void __launch_bounds__(256) vt_gemm_##XS##_##WS##_##YS(                              \
      const X *x, const W *w, const float *bias, Y *y, int M, int N, int K) {                               \
    gemm_tile<X, W, Y>(x, w, bias, y, M, N, K);                                                             \
  }
#define VT_GEMM_ALL_W(XS, X, YS, Y) \
  VT_GEMM(XS, X, f32, float, YS, Y) VT_GEMM(XS, X, f16, f16, YS, Y) VT_GEMM(XS, X, bf16, bf16, YS, Y)

VT_GEMM_ALL_W(f32, float, f32, float)
VT_GEMM_ALL_W(bf16, bf16, bf16, bf16)
VT_GEMM_ALL_W(bf16, bf16, f32, float)
