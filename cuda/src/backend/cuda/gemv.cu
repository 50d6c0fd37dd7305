// Entry points of the gemv family, bf16 weights, block 256 (8 warps, one output per warp), grid ceil(N / 8)
// (gemv) or ceil(I / 8) (swiglu):
//   vt_gemv_<x dtype>_<y dtype>_m<M>(x, w, bias, y, K, N, vec)        y(M, N) = x · wᵀ + bias
//   vt_gemv_swiglu_<act dtype>_m<M>(x, w_gate_up, y, K, I, vec)       y(M, I) = silu(x · gateᵀ) ⊙ (x · upᵀ)
#include "gemv.cuh"

using namespace vtk;

#define VT_GEMV(XS, X, YS, Y, M)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_##XS##_##YS##_m##M(                              \
      const X *x, const bf16 *w, const float *bias, Y *y, int K, int N, int vec) {                          \
    gemv_rows<M, 1, X, Y>(x, w, bias, y, K, N, vec);                                                        \
  }
#define VT_GEMV_ALL_M(XS, X, YS, Y) VT_GEMV(XS, X, YS, Y, 1) VT_GEMV(XS, X, YS, Y, 2) VT_GEMV(XS, X, YS, Y, 4) \
  VT_GEMV(XS, X, YS, Y, 8)

VT_GEMV_ALL_M(f32, float, f32, float)
VT_GEMV_ALL_M(bf16, bf16, bf16, bf16)
VT_GEMV_ALL_M(bf16, bf16, f32, float)

#define VT_GEMV_SWIGLU(XS, X, M)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_swiglu_##XS##_m##M(                              \
      const X *x, const bf16 *w, X *y, int K, int I, int vec) {                                             \
    gemv_rows<M, 2, X, X>(x, w, nullptr, y, K, I, vec);                                                     \
  }
#define VT_GEMV_SWIGLU_ALL_M(XS, X) VT_GEMV_SWIGLU(XS, X, 1) VT_GEMV_SWIGLU(XS, X, 2) VT_GEMV_SWIGLU(XS, X, 4) \
  VT_GEMV_SWIGLU(XS, X, 8)

VT_GEMV_SWIGLU_ALL_M(f32, float)
VT_GEMV_SWIGLU_ALL_M(bf16, bf16)
