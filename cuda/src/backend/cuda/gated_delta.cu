// Entry points of the Gated DeltaNet family (gated_delta.cuh), one per activation type:
//   vt_causal_conv1d_silu_<act>   grid (row chunks, ceil(C / 128)), block 128
//   vt_gdn_gates_<act>            1-D grid-stride, block 256
//   vt_gated_delta_rule_<act>     grid (n_seqs · Hv · ceil(Dv / 32)), block 128: the recurrent form
//   vt_gated_rmsnorm_<act>        grid (ceil(rows / 8)), block 256
// Each is launched with PDL and waits before touching anything (every input is an earlier kernel's output).
#include "gated_delta.cuh"

using namespace vtk;

#define VT_GATED_DELTA(SUFFIX, T)                                                                           \
  extern "C" __global__ void __launch_bounds__(kConvThreads) vt_causal_conv1d_silu_##SUFFIX(                \
      const T *x, long long x_ld, const int32_t *seq_start, const int32_t *slot, const int32_t *pos0,       \
      int n_seqs, int rows, int C, int W, const float *weight, float *conv_state, long long slot_stride,    \
      T *out, int rows_per_chunk) {                                                                         \
    pdl_trigger();                                                                                          \
    pdl_wait();                                                                                             \
    conv_chunk<T>(x, x_ld, seq_start, slot, pos0, n_seqs, rows, C, W, weight, conv_state, slot_stride,      \
                  out, rows_per_chunk);                                                                     \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(256) vt_gdn_gates_##SUFFIX(                                  \
      const T *b, const T *a, long long ld, long long rows, int n_v_heads, const float *A_log,              \
      const float *dt_bias, float *beta, float *g) {                                                        \
    pdl_trigger();                                                                                          \
    pdl_wait();                                                                                             \
    gates_all<T>(b, a, ld, rows, n_v_heads, A_log, dt_bias, beta, g);                                       \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(kRuleThreads) vt_gated_delta_rule_##SUFFIX(                  \
      const T *qkv, const float *g, const float *beta, const int32_t *seq_start, const int32_t *slot,       \
      const int32_t *pos0, int n_k_heads, int n_v_heads, int Dk, int Dv, float *state,                      \
      long long slot_stride, T *out) {                                                                      \
    pdl_trigger();                                                                                          \
    pdl_wait();                                                                                             \
    const int col_blocks = (Dv + kRuleCols - 1) / kRuleCols;                                                \
    const int item = blockIdx.x / col_blocks; /* sequence-major: a sequence's heads run side by side */     \
    delta_rule_recurrent<T>(item / n_v_heads, item % n_v_heads, blockIdx.x % col_blocks, qkv, g, beta,      \
                            seq_start, slot, pos0, n_k_heads, n_v_heads, Dk, Dv, state, slot_stride, out);  \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(256) vt_gated_rmsnorm_##SUFFIX(                              \
      const T *x, const T *z, long long rows, int dim, int heads, long long z_ld, const float *weight,      \
      float eps, T *out) {                                                                                  \
    pdl_trigger();                                                                                          \
    pdl_wait();                                                                                             \
    gated_rmsnorm_rows<T>(x, z, rows, dim, heads, z_ld, weight, eps, out);                                  \
  }

VT_GATED_DELTA(f32, float)
VT_GATED_DELTA(bf16, bf16)
