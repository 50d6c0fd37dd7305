// Entry points of the norm family, grid (rows), block 256 (any multiple of 32 up to 1024 works).
#include "norm.cuh"

using namespace vtk;

#define VT_NORM(SUFFIX, T)                                                                                  \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_rmsnorm_##SUFFIX(const T *x, int dim, const float *w, float eps, T *out) { pdl_trigger(); pdl_wait();                          \
    rmsnorm_row<T>(x, dim, w, eps, out);                                                                    \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_add_rmsnorm_##SUFFIX(T *residual, const T *x, int dim, const float *w, float eps, T *out) { pdl_trigger(); pdl_wait();         \
    add_rmsnorm_row<T>(residual, x, dim, w, eps, out);                                                      \
  }

VT_NORM(f32, float)
VT_NORM(bf16, bf16)

// bf16 activations over an fp32 residual stream: vt_rmsnorm_f32_to_bf16 (the first layer's input norm of the
// fp32 embedding rows) and vt_add_rmsnorm_res32_<x>_<out>.
extern "C" __global__ void __launch_bounds__(1024)
    vt_rmsnorm_f32_to_bf16(const float *x, int dim, const float *w, float eps, bf16 *out) { pdl_trigger(); pdl_wait();
  rmsnorm_row<float, bf16>(x, dim, w, eps, out);
}
#define VT_ADD_NORM_RES32(XS, X, OS, O)                                                                     \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_add_rmsnorm_res32_##XS##_##OS(float *residual, const X *x, int dim, const float *w, float eps, O *out) { pdl_trigger(); pdl_wait(); \
    add_rmsnorm_row<float, X, O>(residual, x, dim, w, eps, out);                                            \
  }
VT_ADD_NORM_RES32(bf16, bf16, bf16, bf16)
VT_ADD_NORM_RES32(bf16, bf16, f32, float)
VT_ADD_NORM_RES32(f32, float, bf16, bf16)
VT_ADD_NORM_RES32(f32, float, f32, float)
