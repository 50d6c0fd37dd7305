// Entry points of the gemv family, bf16 weights, block 256 (8 warps, one output per warp), grid ceil(N / 8)
// (gemv) or ceil(I / 8) (swiglu):
//   vt_gemv_<x dtype>_<y dtype>_m<M>(x, w, bias, y, K, N, vec)        y(M, N) = x · wᵀ + bias
//   vt_gemv_swiglu_<act dtype>_m<M>(x, w_gate_up, y, K, I, vec)       y(M, I) = silu(x · gateᵀ) ⊙ (x · upᵀ)
// and the decode step's fused forms (gemv.cuh), the norm taken from the partial sums of squares that the
// residual form leaves (ss_part (M, ceil(N / 8)) fp32, one per block and row) with the rows times the next norm's
// weight (xw (M, N), activation type):
//   vt_gemv_res_<x dtype>_<rounding>_m<M>(x, w, bias, residual, ss_part, next_norm_w, xw, K, N, vec)
//                                    residual += round(x · wᵀ + bias); ss_part = its partials; xw = residual * g
//   vt_gemv_norm_<act>_m<M>(xw, ss_part, eps, w, bias, y, K, N, vec)
//                                    y = rmsnorm(residual) * g · wᵀ + bias = inv * (xw · wᵀ) + bias
//   vt_gemv_swiglu_norm_<act>_m<M>(xw, ss_part, eps, w_gate_up, y, K, I, vec)
//   vt_gemv_norm_head_bf16_m1(xw, ss_part, eps, w, y, K, N, vec, residual, norm_w, final_rows)
//                                    logits y (fp32) = inv * (xw · wᵀ), and final_rows = rmsnorm(residual) * norm_w
// Each also as <name>_early: the same kernel with gemv.cuh's EARLY weight loads (Ops picks one set when it is
// built: the _early ones under PDL, the plain ones elsewhere and as the op tests' other form).
// The fused-norm forms are the decode step's default at up to 8 rows (more rows: the separate kernels).
#include "gemv.cuh"

using namespace vtk;

#define VT_GEMV_E(XS, X, YS, Y, M, EARLY, SUF)                                                              \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_##XS##_##YS##_m##M##SUF(                         \
      const X *x, const bf16 *w, const float *bias, Y *y, int K, int N, int vec) {                          \
    gemv_rows<M, 1, X, Y, GemvOut::kStore, EARLY>(x, w, bias, y, K, N, vec);                                 \
  }
#define VT_GEMV(XS, X, YS, Y, M) VT_GEMV_E(XS, X, YS, Y, M, false, ) VT_GEMV_E(XS, X, YS, Y, M, true, _early)
#define VT_GEMV_ALL_M(XS, X, YS, Y) VT_GEMV(XS, X, YS, Y, 1) VT_GEMV(XS, X, YS, Y, 2) VT_GEMV(XS, X, YS, Y, 4) \
  VT_GEMV(XS, X, YS, Y, 8)

VT_GEMV_ALL_M(f32, float, f32, float)
VT_GEMV_ALL_M(bf16, bf16, bf16, bf16)
VT_GEMV_ALL_M(bf16, bf16, f32, float)

#define VT_GEMV_SWIGLU_E(XS, X, M, EARLY, SUF)                                                              \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_swiglu_##XS##_m##M##SUF(                         \
      const X *x, const bf16 *w, X *y, int K, int I, int vec) {                                             \
    gemv_rows<M, 2, X, X, GemvOut::kStore, EARLY>(x, w, nullptr, y, K, I, vec);                              \
  }
#define VT_GEMV_SWIGLU(XS, X, M) VT_GEMV_SWIGLU_E(XS, X, M, false, ) VT_GEMV_SWIGLU_E(XS, X, M, true, _early)
#define VT_GEMV_SWIGLU_ALL_M(XS, X) VT_GEMV_SWIGLU(XS, X, 1) VT_GEMV_SWIGLU(XS, X, 2) VT_GEMV_SWIGLU(XS, X, 4) \
  VT_GEMV_SWIGLU(XS, X, 8)

VT_GEMV_SWIGLU_ALL_M(f32, float)
VT_GEMV_SWIGLU_ALL_M(bf16, bf16)

#define VT_GEMV_NORM_E(XS, X, M, EARLY, SUF)                                                                \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_norm_##XS##_m##M##SUF(                           \
      const X *xw, const float *ss_part, float eps, const bf16 *w, const float *bias, X *y, int K, int N,    \
      int vec) {                                                                                             \
    gemv_norm_rows<M, 1, X, EARLY>(xw, ss_part, eps, w, bias, y, K, N, vec);                                 \
  }                                                                                                          \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_swiglu_norm_##XS##_m##M##SUF(                    \
      const X *xw, const float *ss_part, float eps, const bf16 *w, X *y, int K, int I, int vec) {            \
    gemv_norm_rows<M, 2, X, EARLY>(xw, ss_part, eps, w, nullptr, y, K, I, vec);                              \
  }
#define VT_GEMV_NORM(XS, X, M) VT_GEMV_NORM_E(XS, X, M, false, ) VT_GEMV_NORM_E(XS, X, M, true, _early)
#define VT_GEMV_NORM_ALL_M(XS, X) VT_GEMV_NORM(XS, X, 1) VT_GEMV_NORM(XS, X, 2) VT_GEMV_NORM(XS, X, 4) \
  VT_GEMV_NORM(XS, X, 8)

VT_GEMV_NORM_ALL_M(f32, float)
VT_GEMV_NORM_ALL_M(bf16, bf16)

// The lm_head's, bf16 activations and batch 1 only (the step that is furthest from the bandwidth limit; with fp32
// activations the decoder's final rows share normed_'s buffer, which this kernel reads). Bounded to 64 registers so
// that 4 blocks fit an SM, as with the fp32 GEMV it replaces (unbounded: 68, 3 blocks; bounded at M > 1 it spilled).
#define VT_GEMV_NORM_HEAD_E(XS, X, EARLY, SUF)                                                              \
  extern "C" __global__ void __launch_bounds__(256, 4) vt_gemv_norm_head_##XS##_m1##SUF(                     \
      const X *xw, const float *ss_part, float eps, const bf16 *w, float *y, int K, int N, int vec,           \
      const float *residual, const float *norm_w, float *final_rows) {                                       \
    gemv_norm_head_rows<1, X, EARLY>(xw, ss_part, eps, w, y, K, N, vec, residual, norm_w, final_rows);       \
  }
VT_GEMV_NORM_HEAD_E(bf16, bf16, false, ) VT_GEMV_NORM_HEAD_E(bf16, bf16, true, _early)

#define VT_GEMV_RES_E(XS, X, RS, RND, M, EARLY, SUF)                                                        \
  extern "C" __global__ void __launch_bounds__(256) vt_gemv_res_##XS##_##RS##_m##M##SUF(                     \
      const X *x, const bf16 *w, const float *bias, float *residual, float *ss_part, const float *next_norm_w, \
      X *xw, int K, int N, int vec) {                                                                        \
    gemv_rows<M, 1, X, RND, GemvOut::kResidualSS, EARLY>(x, w, bias, nullptr, K, N, vec, residual, ss_part,   \
                                                         next_norm_w, xw);                                   \
  }
#define VT_GEMV_RES(XS, X, RS, RND, M) VT_GEMV_RES_E(XS, X, RS, RND, M, false, ) \
  VT_GEMV_RES_E(XS, X, RS, RND, M, true, _early)
#define VT_GEMV_RES_ALL_M(XS, X, RS, RND) VT_GEMV_RES(XS, X, RS, RND, 1) VT_GEMV_RES(XS, X, RS, RND, 2) \
  VT_GEMV_RES(XS, X, RS, RND, 4) VT_GEMV_RES(XS, X, RS, RND, 8)

VT_GEMV_RES_ALL_M(f32, float, f32, float)
VT_GEMV_RES_ALL_M(bf16, bf16, bf16, bf16)
VT_GEMV_RES_ALL_M(bf16, bf16, f32, float)
