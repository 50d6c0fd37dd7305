// Entry points of the activation family, 1-D grid-stride launches: vt_silu_mul_<activation dtype>,
// vt_split_q_gate_<activation dtype>, vt_sigmoid_mul_<activation dtype>; and vt_f16_to_bf16, the load-time
// narrowing of fp16 weights for bf16 activations.
#include "activation.cuh"

using namespace vtk;

#define VT_SILU_MUL(SUFFIX, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                                         \
      vt_silu_mul_##SUFFIX(const T *gate, const T *up, long long rows, int F, long long ld, T *out) { pdl_trigger(); pdl_wait();         \
    silu_mul_all<T>(gate, up, rows, F, ld, out);                                                            \
  }

#define VT_ATTENTION_GATE(SUFFIX, T)                                                                        \
  extern "C" __global__ void __launch_bounds__(256) vt_split_q_gate_##SUFFIX(                               \
      const T *src, long long rows, int n_heads, int head_dim, long long rest, T *qkv, T *gate) {          \
    pdl_trigger();                                                                                          \
    pdl_wait();                                                                                             \
    split_q_gate_all<T>(src, rows, n_heads, head_dim, rest, qkv, gate);                                    \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(256) vt_sigmoid_mul_##SUFFIX(T *x, const T *gate, long long n) { \
    pdl_trigger();                                                                                          \
    pdl_wait();                                                                                             \
    sigmoid_mul_all<T>(x, gate, n);                                                                         \
  }

// fp16 weights for bf16 activations, in place, once at load: each element widened exactly and rounded to the nearest
// bf16 (ties to even), as torch's .to(torch.bfloat16) does, so that the bf16 GEMV and tensor-core GEMMs take them.
extern "C" __global__ void __launch_bounds__(256) vt_f16_to_bf16(uint16_t *w, long long n) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x)
    w[i] = f32_to_bf16(to_f32(f16{w[i]})).bits;
}

VT_SILU_MUL(f32, float)
VT_SILU_MUL(bf16, bf16)
VT_ATTENTION_GATE(f32, float)
VT_ATTENTION_GATE(bf16, bf16)
