// SwiGLU's gated product: out(T, F) = silu(gate) * up, gate and up rows `ld` elements apart: separate (T, F)
// buffers (ld = F) or the halves of one gate_up(T, 2F) buffer (up = gate + F, ld = 2F). out may be gate only
// when ld == F (then every element is read by the thread that writes it). Grid-stride over T * F elements.
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

}  // namespace vtk
