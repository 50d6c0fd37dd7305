// RMSNorm, plain and fused with the residual add (the pattern between sub-blocks). One block per row; the sum
// of squares is fp32 whatever the activation type; the weight is fp32.
//   rmsnorm:      out = x / rms(x) * w                     (out may be x)
//   add_rmsnorm:  residual += x;  out = rmsnorm(residual)   (residual is rounded to the activation type first,
//                 and the norm reads that rounded value: it is what the next sub-block's residual add sees)
// Each thread re-reads in the second pass exactly the elements it wrote in the first, so no barrier is needed
// between the residual store and its reuse.
#pragma once

#include "common.cuh"

namespace vtk {

template <class T>
__device__ __forceinline__ void rmsnorm_row(const T *x, int dim, const float *__restrict__ w, float eps, T *out) {
  const int64_t r = blockIdx.x;
  const T *xr = x + r * dim;
  T *o = out + r * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  const float inv = 1.f / sqrtf(block_sum(ss) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = from_f32<T>(to_f32(xr[i]) * inv * w[i]);
}

template <class T>
__device__ __forceinline__ void add_rmsnorm_row(T *__restrict__ residual, const T *__restrict__ x, int dim,
                                                const float *__restrict__ w, float eps, T *__restrict__ out) {
  const int64_t r = blockIdx.x;
  T *res = residual + r * dim;
  const T *xr = x + r * dim;
  T *o = out + r * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const T sum = from_f32<T>(to_f32(res[i]) + to_f32(xr[i]));
    res[i] = sum;
    const float v = to_f32(sum);
    ss += v * v;
  }
  const float inv = 1.f / sqrtf(block_sum(ss) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = from_f32<T>(to_f32(res[i]) * inv * w[i]);
}

}  // namespace vtk
