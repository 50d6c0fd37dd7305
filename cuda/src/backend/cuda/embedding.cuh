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

}  // namespace vtk
