// Entry points of the attention family:
//   vt_paged_attention_<act>_d<32 * VPL>: grid (n_heads, T), block 128; head_dim <= 32 * VPL
//   vt_kv_store_<act>: grid (T), block 128.
#include "attention.cuh"

using namespace vtk;

#define VT_ATTENTION(SUFFIX, T, VPL)                                                                        \
  extern "C" __global__ void __launch_bounds__(kAttnWarps * 32) vt_paged_attention_##SUFFIX##_d##VPL(        \
      const T *q, const T *k_cache, const T *v_cache, const int32_t *seq_q_start, const int32_t *seq_pos0,   \
      const int32_t *block_tables, int n_seqs, int max_blocks, int block_size, int n_heads, int n_kv_heads,  \
      int head_dim, float scale, T *out) {                                                                  \
    paged_attention_row<T, VPL>(q, k_cache, v_cache, seq_q_start, seq_pos0, block_tables, n_seqs, max_blocks, \
                                block_size, n_heads, n_kv_heads, head_dim, scale, out);                     \
  }
#define VT_KV_STORE(SUFFIX, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(128) vt_kv_store_##SUFFIX(                                    \
      const T *k, const T *v, int row_elems, const int32_t *slot, T *k_cache, T *v_cache) {                 \
    kv_store_token<T>(k, v, row_elems, slot, k_cache, v_cache);                                             \
  }

// d<VPL>: VPL values per lane, head_dim up to 32 * VPL (4: 128, 8: 256)
VT_ATTENTION(f32, float, 4)
VT_ATTENTION(f32, float, 8)
VT_ATTENTION(bf16, bf16, 4)
VT_ATTENTION(bf16, bf16, 8)
VT_KV_STORE(f32, float)
VT_KV_STORE(bf16, bf16)
