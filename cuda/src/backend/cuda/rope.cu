// Entry points of the rope family: vt_rope_<activation dtype>, grid (T), block 128, dynamic shared memory
// (head_dim + 4 * head_dim) * 4 bytes.
#include "rope.cuh"

using namespace vtk;

#define VT_ROPE(SUFFIX, T)                                                                                  \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_rope_##SUFFIX(T *x, int n_heads, int head_dim, long long row_stride, const int32_t *pos,             \
                       const float *inv_freq, float attn_scale, const float *norm_w, float eps) {            \
    rope_token<T>(x, n_heads, head_dim, row_stride, pos, inv_freq, attn_scale, norm_w, eps);                \
  }

VT_ROPE(f32, float)
VT_ROPE(bf16, bf16)
