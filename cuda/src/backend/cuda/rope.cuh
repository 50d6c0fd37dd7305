// Rotary embedding in place, HF "rotate_half" (NeoX) layout, optionally preceded by Qwen3's per-head RMSNorm
// of q or k (norm_w != nullptr), fused so each head vector is read and written once.
//   x(T, n_heads, head_dim) with rows row_stride elements apart (a fused qkv buffer works), pos(T),
//   inv_freq(head_dim / 2) with any scaling already applied, cos/sin multiplied by attn_scale.
// One block per token. The token's cos/sin table is computed once into shared memory, from the angle
// pos · inv_freq formed in double like the CPU op (an fp32 product is off by ~1e-4 rad at positions in the
// thousands); then each warp takes whole heads, stages the (normed) head in shared memory and rotates pairs
// (i, i + half), which live in different lanes.
// Dynamic shared memory: (head_dim + n_warps * head_dim) floats.
#pragma once

#include "common.cuh"

namespace vtk {

template <class T>
__device__ __forceinline__ void rope_token(T *x, int n_heads, int head_dim, int64_t row_stride,
                                           const int32_t *__restrict__ pos, const float *__restrict__ inv_freq,
                                           float attn_scale, const float *__restrict__ norm_w, float eps) {
  extern __shared__ float smem[];
  const int half = head_dim / 2;
  float *cos_t = smem, *sin_t = smem + half;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  float *head = smem + head_dim + warp * head_dim;
  const int64_t t = blockIdx.x;
  const double p = double(pos[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(p * double(inv_freq[i]), &s, &c);
    cos_t[i] = float(c * attn_scale);
    sin_t[i] = float(s * attn_scale);
  }
  __syncthreads();

  for (int h = warp; h < n_heads; h += n_warps) {
    T *v = x + t * row_stride + int64_t(h) * head_dim;
    float ss = 0.f;
    for (int i = lane; i < head_dim; i += 32) {
      const float e = to_f32(v[i]);
      head[i] = e;
      ss += e * e;
    }
    if (norm_w) {
      const float inv = 1.f / sqrtf(warp_sum(ss) / float(head_dim) + eps);
      for (int i = lane; i < head_dim; i += 32) head[i] = head[i] * inv * norm_w[i];
    }
    __syncwarp();
    for (int i = lane; i < half; i += 32) {
      const float a = head[i], b = head[i + half];
      v[i] = from_f32<T>(a * cos_t[i] - b * sin_t[i]);
      v[i + half] = from_f32<T>(b * cos_t[i] + a * sin_t[i]);
    }
    __syncwarp();  // the next head overwrites this warp's staging area
  }
}

}  // namespace vtk
