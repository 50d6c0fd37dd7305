// RMSNorm, plain and fused with the residual add (the pattern between sub-blocks). One block per row; the sum
// of squares is fp32 whatever the activation type; the weight is fp32.
//   rmsnorm:      out = x / rms(x) * w                     (out may be x)
//   add_rmsnorm:  residual += x;  out = rmsnorm(residual)   (residual is rounded to the activation type first,
//                 and the norm reads that rounded value: it is what the next sub-block's residual add sees)
//   the _res32 forms (bf16 activations): the residual stream is fp32 (as in production engines: only the
//                 products' inputs and the KV cache are bf16), x is the sublayer output (bf16 or fp32) and
//                 out is bf16 (the next product's input) or fp32 (the final norm, the lm_head's input)
// Each thread re-reads in the second pass exactly the elements it wrote in the first, so no barrier is needed
// between the residual store and its reuse.
#pragma once

#include "common.cuh"

namespace vtk {

template <class In, class Out = In>
__device__ __forceinline__ void rmsnorm_row(const In *x, int dim, const float *__restrict__ w, float eps, Out *out) {
  const int64_t r = blockIdx.x;
  const In *xr = x + r * dim;
  Out *o = out + r * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  const float inv = 1.f / sqrtf(block_sum(ss) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = from_f32<Out>(to_f32(xr[i]) * inv * w[i]);
}

// R: the residual's type, X: the sublayer output's, Out: the normed output's. The product's bf16 path keeps the
// residual in fp32 (R = float, X = bf16 or float) and writes the normed rows in bf16 for the next product, or
// in fp32 for the lm_head (the final norm).
template <class R, class X = R, class Out = R>
__device__ __forceinline__ void add_rmsnorm_row(R *__restrict__ residual, const X *__restrict__ x, int dim,
                                                const float *__restrict__ w, float eps, Out *__restrict__ out) {
  const int64_t r = blockIdx.x;
  R *res = residual + r * dim;
  const X *xr = x + r * dim;
  Out *o = out + r * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const R sum = from_f32<R>(to_f32(res[i]) + to_f32(xr[i]));
    res[i] = sum;
    const float v = to_f32(sum);
    ss += v * v;
  }
  const float inv = 1.f / sqrtf(block_sum(ss) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = from_f32<Out>(to_f32(res[i]) * inv * w[i]);
}

}  // namespace vtk
