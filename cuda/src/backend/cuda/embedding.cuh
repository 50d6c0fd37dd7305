// Embedding gather: out(T, dim) = table[ids[t]] in the activation type. One block per token; the table
// (bf16, fp16 or fp32, as stored in the checkpoint) is widened to fp32 and, for bf16 activations, a bf16
// table is copied exactly.
#pragma once

#include "common.cuh"

namespace vtk {

template <class Table, class Out>
__device__ __forceinline__ void embed_row(const Table *__restrict__ table, int dim, const int32_t *__restrict__ ids,
                                          Out *__restrict__ out) {
  const int64_t t = blockIdx.x;
  const Table *row = table + int64_t(ids[t]) * dim;
  Out *o = out + t * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = from_f32<Out>(to_f32(row[i]));
}

// The decode step's first norm fused into the gather (the fused norm, gemv.cuh): residual(T, dim) fp32 = the rows,
// as embed_row with an fp32 output; xw = residual * norm_w rounded to X, and ss_part(T, ceil(dim / 8)) the sums of
// squares of each 8 elements, as gemv_residual leaves them for the next product (each square rounded before the
// sum, in element order). One block per token.
template <class Table, class X>
__device__ __forceinline__ void embed_norm_row(const Table *__restrict__ table, int dim,
                                               const int32_t *__restrict__ ids, float *__restrict__ residual,
                                               const float *__restrict__ norm_w, X *__restrict__ xw,
                                               float *__restrict__ ss_part) {
  const int64_t t = blockIdx.x;
  const Table *row = table + int64_t(ids[t]) * dim;
  const int parts = (dim + 7) / 8;
  for (int g = threadIdx.x; g < parts; g += blockDim.x) {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = 8 * g + j;
      if (i >= dim) break;
      const float v = to_f32(row[i]);
      residual[t * dim + i] = v;
      xw[t * dim + i] = from_f32<X>(v * norm_w[i]);
      ss += __fmul_rn(v, v);
    }
    ss_part[t * parts + g] = ss;
  }
}

}  // namespace vtk
