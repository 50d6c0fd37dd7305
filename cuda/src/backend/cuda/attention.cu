// Entry points of the attention family:
//   vt_paged_attention_<act>_d<32 * VPL>: grid (n_heads, T), block 128; head_dim <= 32 * VPL
//   vt_kv_store_<act>: grid (T), block 128.
//   vt_attention_split_<act>_d<32 * VPL>, vt_attention_split_bf16_mma_hd<HD>: split-K decode attention
//     (attention_split.cuh), grid (T, n_kv_heads, n_splits), block 128, dynamic shared memory as said there;
//     vt_attention_split_bf16_mma_hd<HD>_cluster: the same with n_splits = kSplitCluster as one cluster (sm_90+).
#include "attention.cuh"
#include "attention_split.cuh"

using namespace vtk;

#define VT_ATTENTION(SUFFIX, T, VPL)                                                                        \
  extern "C" __global__ void __launch_bounds__(kAttnWarps * 32) vt_paged_attention_##SUFFIX##_d##VPL(        \
      const T *q, long long q_row_stride, const T *k_cache, const T *v_cache, const int32_t *seq_q_start,     \
      const int32_t *seq_pos0, const int32_t *block_tables, int n_seqs, int max_blocks, int block_size,       \
      int n_heads, int n_kv_heads, int head_dim, float scale, T *out) { pdl_trigger(); pdl_wait();                                      \
    paged_attention_row<T, VPL>(q, q_row_stride, k_cache, v_cache, seq_q_start, seq_pos0, block_tables,     \
                                n_seqs, max_blocks, block_size, n_heads, n_kv_heads, head_dim, scale, out); \
  }
#define VT_KV_STORE(SUFFIX, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(128) vt_kv_store_##SUFFIX(                                    \
      const T *k, const T *v, int row_elems, const int32_t *slot, T *k_cache, T *v_cache) { pdl_trigger(); pdl_wait();                 \
    kv_store_token<T>(k, v, row_elems, slot, k_cache, v_cache);                                             \
  }

// d<VPL>: VPL values per lane, head_dim up to 32 * VPL (4: 128, 8: 256)
VT_ATTENTION(f32, float, 4)
VT_ATTENTION(f32, float, 8)
VT_ATTENTION(bf16, bf16, 4)
VT_ATTENTION(bf16, bf16, 8)
VT_KV_STORE(f32, float)
VT_KV_STORE(bf16, bf16)

// The split-K entry points' parameters.
#define VT_SPLIT_PARAMS(T)                                                                                   \
  const T *q, long long q_row_stride, const T *k_cache, const T *v_cache, const int32_t *seq_q_start,         \
      const int32_t *seq_pos0, const int32_t *block_tables, int n_seqs, int max_blocks, int block_size,       \
      int n_heads, int n_kv_heads, int head_dim, float scale, int n_splits, unsigned *tickets, float *part_ml, \
      float *part_acc, T *out, int split_keys
#define VT_SPLIT_ARGS                                                                                        \
  q, q_row_stride, k_cache, v_cache, seq_q_start, seq_pos0, block_tables, n_seqs, max_blocks, block_size,     \
      n_heads, n_kv_heads, head_dim, scale, n_splits, tickets, part_ml, part_acc, out, split_keys

// attention_split waits for the previous kernel itself, after its first key loads.
#define VT_ATTENTION_SPLIT(NAME, T, VPL, MMA_HD, MIN_BLOCKS)                                                 \
  extern "C" __global__ void __launch_bounds__(kSplitWarps * 32, MIN_BLOCKS) NAME(VT_SPLIT_PARAMS(T)) {      \
    pdl_trigger();                                                                                           \
    attention_split<T, VPL, MMA_HD>(VT_SPLIT_ARGS);                                                          \
  }

// Every split-K kernel of one family (M: its entry macro, P: its name prefix). CUDA cores, head_dim up to
// 32 * VPL; tensor cores (bf16) for head_dim exactly HD. MIN_BLOCKS 1 lifts ptxas's default register cap (96 at
// hd 128), under which the value loads of a step cannot all be in flight with the key loads (q 16 + acc 32 +
// loads 64 registers at hd 128).
#define VT_SPLIT_FAMILY(M, P)                    \
  M(P##_f32_d4, float, 4, 0, 2)                  \
  M(P##_f32_d8, float, 8, 0, 2)                  \
  M(P##_bf16_d4, bf16, 4, 0, 2)                  \
  M(P##_bf16_d8, bf16, 8, 0, 2)                  \
  M(P##_bf16_mma_hd64, bf16, 0, 64, 1)           \
  M(P##_bf16_mma_hd128, bf16, 0, 128, 1)         \
  M(P##_bf16_mma_hd256, bf16, 0, 256, 1)

VT_SPLIT_FAMILY(VT_ATTENTION_SPLIT, vt_attention_split)

// The cluster form (attention_split.cuh's cluster_merge): kSplitCluster splits of a (row, kv head) as one cluster,
// grid (T, n_kv_heads, kSplitCluster); sm_90+ only.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define VT_ATTENTION_SPLIT_CLUSTER(HD)                                                                        \
  extern "C" __global__ void __launch_bounds__(kSplitWarps * 32, 1) __cluster_dims__(1, 1, kSplitCluster)    \
      vt_attention_split_bf16_mma_hd##HD##_cluster(VT_SPLIT_PARAMS(bf16)) {                                   \
    pdl_trigger();                                                                                           \
    attention_split<bf16, 0, HD, kSplitCluster>(VT_SPLIT_ARGS);                                              \
  }
VT_ATTENTION_SPLIT_CLUSTER(64)
VT_ATTENTION_SPLIT_CLUSTER(128)
VT_ATTENTION_SPLIT_CLUSTER(256)
#endif
