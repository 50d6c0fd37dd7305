// Entry points of the fused q|k|v product + RoPE + KV store (gemv_rope.cuh), bf16 weights, block 256, grid
// (n_heads + 2 n_kv_heads) * head_dim / 16, thread-block clusters of head_dim / 16 (one head each), sm_90 and newer
// only (older targets' images lack them and the step uses gemv_norm + rope_store):
//   vt_gemv_norm_rope_<act>_hd<head_dim>_m<M>(xw, ss_part, eps, w_qkv, bias, qkv, K, n_heads, n_kv_heads, vec, pos,
//                                             inv_freq, attn_scale, q_norm, k_norm, slot, k_cache, v_cache)
// and each as <name>_early (gemv.cuh's EARLY weight loads; Ops picks the set as for the other GEMVs).
#include "gemv_rope.cuh"

using namespace vtk;

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define VT_GEMV_NORM_ROPE_E(XS, X, HD, M, EARLY, SUF)                                                        \
  extern "C" __global__ void __launch_bounds__(256) __cluster_dims__(HD / 16, 1, 1)                          \
      vt_gemv_norm_rope_##XS##_hd##HD##_m##M##SUF(                                                           \
          const X *xw, const float *ss_part, float eps, const bf16 *w, const float *bias, X *qkv, int K,      \
          int n_heads, int n_kv_heads, int vec, const int32_t *pos, const float *inv_freq, float attn_scale,  \
          const float *q_norm, const float *k_norm, const int32_t *slot, X *k_cache, X *v_cache) {            \
    gemv_norm_rope_rows<M, HD, X, EARLY>(xw, ss_part, eps, w, bias, qkv, K, n_heads, n_kv_heads, vec, pos,    \
                                         inv_freq, attn_scale, q_norm, k_norm, slot, k_cache, v_cache);       \
  }
#define VT_GEMV_NORM_ROPE(XS, X, HD, M) VT_GEMV_NORM_ROPE_E(XS, X, HD, M, false, ) \
  VT_GEMV_NORM_ROPE_E(XS, X, HD, M, true, _early)
#define VT_GEMV_NORM_ROPE_ALL_M(XS, X, HD) VT_GEMV_NORM_ROPE(XS, X, HD, 1) VT_GEMV_NORM_ROPE(XS, X, HD, 2) \
  VT_GEMV_NORM_ROPE(XS, X, HD, 4) VT_GEMV_NORM_ROPE(XS, X, HD, 8)

VT_GEMV_NORM_ROPE_ALL_M(f32, float, 64)
VT_GEMV_NORM_ROPE_ALL_M(f32, float, 128)
VT_GEMV_NORM_ROPE_ALL_M(bf16, bf16, 64)
VT_GEMV_NORM_ROPE_ALL_M(bf16, bf16, 128)
#endif
