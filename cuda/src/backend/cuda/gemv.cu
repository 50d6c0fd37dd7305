// Entry points of the gemv family: vt_gemv_<x dtype>_<y dtype>_m<M>, bf16 weights, grid (ceil(N / 8)),
// block 256 (8 warps = 8 output rows).
#include "gemv.cuh"

using namespace vtk;

#define VT_GEMV(XS, X, YS, Y, M)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_##XS##_##YS##_m##M(                              \
      const X *x, const bf16 *w, const float *bias, Y *y, int K, int N, int vec) {                          \
    gemv_row<M, X, Y>(x, w, bias, y, K, N, vec);                                                            \
  }
#define VT_GEMV_ALL_M(XS, X, YS, Y) VT_GEMV(XS, X, YS, Y, 1) VT_GEMV(XS, X, YS, Y, 2) VT_GEMV(XS, X, YS, Y, 4) \
  VT_GEMV(XS, X, YS, Y, 8)

VT_GEMV_ALL_M(f32, float, f32, float)
VT_GEMV_ALL_M(bf16, bf16, bf16, bf16)
VT_GEMV_ALL_M(bf16, bf16, f32, float)
