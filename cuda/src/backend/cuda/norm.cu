// Entry points of the norm family, grid (rows), block 256 (any multiple of 32 up to 1024 works).
#include "norm.cuh"

using namespace vtk;

#define VT_NORM(SUFFIX, T)                                                                                  \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_rmsnorm_##SUFFIX(const T *x, int dim, const float *w, float eps, T *out) {                          \
    rmsnorm_row<T>(x, dim, w, eps, out);                                                                    \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_add_rmsnorm_##SUFFIX(T *residual, const T *x, int dim, const float *w, float eps, T *out) {         \
    add_rmsnorm_row<T>(residual, x, dim, w, eps, out);                                                      \
  }

VT_NORM(f32, float)
VT_NORM(bf16, bf16)
