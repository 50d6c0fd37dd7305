// Entry points of the activation family: vt_silu_mul_<activation dtype>, 1-D grid-stride launch.
#include "activation.cuh"

using namespace vtk;

#define VT_SILU_MUL(SUFFIX, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                                         \
      vt_silu_mul_##SUFFIX(const T *gate, const T *up, long long rows, int F, long long ld, T *out) { pdl_trigger(); pdl_wait();         \
    silu_mul_all<T>(gate, up, rows, F, ld, out);                                                            \
  }

VT_SILU_MUL(f32, float)
VT_SILU_MUL(bf16, bf16)
