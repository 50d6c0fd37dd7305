// Entry points of the rope family, dynamic shared memory (head_dim + 4 * head_dim) * 4 bytes for block 128; rot:
// the rotated leading dims of each head (head_dim: all):
//   vt_rope_<activation dtype>:       grid (T), block 128
//   vt_rope_store_<activation dtype>: grid (T, ceil((n_heads + 2 n_kv_heads) / 4)), block 128
#include "rope.cuh"

using namespace vtk;

#define VT_ROPE(SUFFIX, T)                                                                                  \
  extern "C" __global__ void __launch_bounds__(1024)                                                        \
      vt_rope_##SUFFIX(T *x, int n_heads, int head_dim, int rot, long long row_stride, const int32_t *pos,    \
                       const float *inv_freq, float attn_scale, const float *norm_w, float eps) { pdl_trigger(); pdl_wait();            \
    rope_token<T>(x, n_heads, head_dim, rot, row_stride, pos, inv_freq, attn_scale, norm_w, eps);           \
  }
#define VT_ROPE_STORE(SUFFIX, T)                                                                            \
  extern "C" __global__ void __launch_bounds__(1024) vt_rope_store_##SUFFIX(                                 \
      T *qkv, int n_heads, int n_kv_heads, int head_dim, int rot, const int32_t *pos, const float *inv_freq, \
      float attn_scale, const float *q_norm, const float *k_norm, float eps, const int32_t *slot,             \
      T *k_cache, T *v_cache) { pdl_trigger(); /* rope_store_token waits */                                     \
    rope_store_token<T>(qkv, n_heads, n_kv_heads, head_dim, rot, pos, inv_freq, attn_scale, q_norm, k_norm, \
                        eps, slot, k_cache, v_cache);                                                       \
  }

VT_ROPE(f32, float)
VT_ROPE(bf16, bf16)
VT_ROPE_STORE(f32, float)
VT_ROPE_STORE(bf16, bf16)
