// The activation family's elementwise kernels, each a grid-stride loop over its elements:
//   silu_mul_all:   SwiGLU's gated product: out(T, F) = silu(gate) * up, gate and up rows `ld` elements apart:
//                   separate (T, F) buffers (ld = F) or the halves of one gate_up(T, 2F) buffer (up = gate + F,
//                   ld = 2F). out may be gate only when ld == F (then every element is read by the thread that
//                   writes it).
//   split_q_gate_all, sigmoid_mul_all: Qwen3.5's gated attention around the attention (Ops::split_q_gate,
//                   Ops::sigmoid_mul say what they compute).
#pragma once

#include "common.cuh"

namespace vtk {

template <class T>
__device__ __forceinline__ void silu_mul_all(const T *gate, const T *up, int64_t T_rows, int F, int64_t ld, T *out) {
  const int64_t n = T_rows * F;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / F, i = e - t * F;
    const float g = to_f32(gate[t * ld + i]), u = to_f32(up[t * ld + i]);
    out[e] = from_f32<T>(g / (1.f + expf(-g)) * u);
  }
}

// q_proj's output of a gated attention holds, per head, [q (D) | gate (D)]; rope_store and the attention kernels
// read q heads side by side, before the k|v columns. One thread per element of src(T, 2 QD + rest), QD = H * D: its
// element goes to qkv(T, QD + rest) = [q heads | rest] or to gate(T, QD). A plain copy: no rounding.
template <class T>
__device__ __forceinline__ void split_q_gate_all(const T *__restrict__ src, int64_t rows, int n_heads, int head_dim,
                                                 int64_t rest, T *__restrict__ qkv, T *__restrict__ gate) {
  const int64_t qd = int64_t(n_heads) * head_dim, in_w = 2 * qd + rest, out_w = qd + rest, n = rows * in_w;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / in_w, i = e - t * in_w;
    if (i >= 2 * qd) {
      qkv[t * out_w + qd + (i - 2 * qd)] = src[e];
      continue;
    }
    const int64_t h = i / (2 * head_dim), j = i - h * 2 * head_dim;
    if (j < head_dim) qkv[t * out_w + h * head_dim + j] = src[e];
    else gate[t * qd + h * head_dim + (j - head_dim)] = src[e];
  }
}

// x(n) *= sigmoid(gate(n)) in place, in fp32, rounded once: the CPU's o *= 1 / (1 + exp(-gate)).
template <class T>
__device__ __forceinline__ void sigmoid_mul_all(T *x, const T *__restrict__ gate, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x)
    x[e] = from_f32<T>(to_f32(x[e]) * (1.f / (1.f + expf(-to_f32(gate[e])))));
}

}  // namespace vtk
