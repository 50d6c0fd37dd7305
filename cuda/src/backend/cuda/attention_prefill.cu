// Entry points of the prefill attention family (bf16 activations only):
//   vt_attention_prefill_bf16_d<D>: grid (n_heads, n_tiles), block kPrefillThreads (128), dynamic shared memory
//   prefill_smem_bytes(D) (above 48 KB for D = 128 and 256: the host raises the function's limit once).
#include "attention_prefill.cuh"

using namespace vtk;

#define VT_ATTENTION_PREFILL(D)                                                                               \
  extern "C" __global__ void __launch_bounds__(kPrefillThreads, 2) vt_attention_prefill_bf16_d##D(            \
      const bf16 *q, long long q_stride, const bf16 *k_cache, const bf16 *v_cache, const int32_t *seq_q_start, \
      const int32_t *seq_pos0, const int32_t *block_tables, int max_blocks, int block_size, int n_heads,      \
      int n_kv_heads, float scale_log2, const int32_t *tiles, bf16 *out) {                                    \
    attention_prefill_tile<D>(q, q_stride, k_cache, v_cache, seq_q_start, seq_pos0, block_tables, max_blocks,  \
                              block_size, n_heads, n_kv_heads, scale_log2, tiles, out);                       \
  }

VT_ATTENTION_PREFILL(64)
VT_ATTENTION_PREFILL(128)
VT_ATTENTION_PREFILL(256)
