// Rotary embedding in place, HF "rotate_half" (NeoX) layout, optionally preceded by Qwen3's per-head RMSNorm
// of q or k (norm_w != nullptr), fused so each head vector is read and written once. RoPE turns the leading rot
// dims of each head (pairs (i, i + rot/2)) and passes the rest through (normed): rot = head_dim for the dense
// models, Qwen3.5's partial RoPE a part (64 of 256); rot == head_dim runs exactly the full rotation's arithmetic.
//   rope:       x(T, n_heads, head_dim) with rows row_stride elements apart (a fused qkv buffer works), pos(T),
//               inv_freq(rot / 2) with any scaling already applied, cos/sin multiplied by attn_scale.
//   rope_store: the decode step's three launches in one, over a fused qkv(T, (n_heads + 2 n_kv_heads) head_dim)
//               whose rows are [q heads | k heads | v heads]: rope (with q_norm) on the q heads, rope (with
//               k_norm) on the k heads, both in place, and the roped k and the v heads of token t copied to the
//               cache row slot[t] (slot < 0: padding, nothing stored). The cache (n_slots, n_kv_heads, head_dim).
// Each token's cos/sin table is computed into shared memory from the angle pos · inv_freq formed in double
// like the CPU op (an fp32 product is off by ~1e-4 rad at positions in the thousands); then each warp takes
// whole heads, stages the (normed) head in shared memory and rotates pairs (i, i + half), which live in
// different lanes. Both kernels rotate a head through the same rope_head(), so rope_store's q, k and cache
// rows are bit for bit those of rope + rope + kv_store.
// Dynamic shared memory: (head_dim + n_warps * head_dim) floats (the table takes rot of the first head_dim).
#pragma once

#include "common.cuh"

namespace vtk {

// cos_t/sin_t(rot / 2) for position p; every thread of the block takes part, the caller syncs.
__device__ __forceinline__ void rope_table(int32_t p, const float *__restrict__ inv_freq, int half, float attn_scale,
                                           float *cos_t, float *sin_t) {
  const double pd = double(p);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(pd * double(inv_freq[i]), &s, &c);
    cos_t[i] = float(c * attn_scale);
    sin_t[i] = float(s * attn_scale);
  }
}

// One warp: the head src(head_dim) normed (norm_w != nullptr) and its leading rot dims rotated, the result
// written to dst (src itself for in place) and to copy (the cache row), each when not null. head: this warp's
// head_dim floats of shared memory. The products are fused explicitly so every caller rounds alike.
template <class T>
__device__ __forceinline__ void rope_head(const T *src, T *dst, T *copy, float *head, const float *cos_t,
                                          const float *sin_t, int head_dim, int rot, const float *__restrict__ norm_w,
                                          float eps) {
  const int lane = threadIdx.x & 31, half = rot / 2;
  float ss = 0.f;
  for (int i = lane; i < head_dim; i += 32) {
    const float e = to_f32(src[i]);
    head[i] = e;
    ss = fmaf(e, e, ss);
  }
  if (norm_w) {  // the same for the whole warp
    const float inv = 1.f / sqrtf(warp_sum(ss) / float(head_dim) + eps);
    for (int i = lane; i < head_dim; i += 32) head[i] = head[i] * inv * norm_w[i];
  }
  __syncwarp();
  for (int i = lane; i < half; i += 32) {
    const float a = head[i], b = head[i + half];
    const T lo = from_f32<T>(fmaf(a, cos_t[i], -(b * sin_t[i])));
    const T hi = from_f32<T>(fmaf(b, cos_t[i], a * sin_t[i]));
    if (dst) dst[i] = lo, dst[i + half] = hi;
    if (copy) copy[i] = lo, copy[i + half] = hi;
  }
  for (int i = rot + lane; i < head_dim; i += 32) {  // partial RoPE: the rest as normed (none when rot == head_dim)
    const T e = from_f32<T>(head[i]);
    if (dst) dst[i] = e;
    if (copy) copy[i] = e;
  }
  __syncwarp();  // the next head overwrites this warp's staging area
}

// Grid (T), any block size that is a multiple of 32.
template <class T>
__device__ __forceinline__ void rope_token(T *x, int n_heads, int head_dim, int rot, int64_t row_stride,
                                           const int32_t *__restrict__ pos, const float *__restrict__ inv_freq,
                                           float attn_scale, const float *__restrict__ norm_w, float eps) {
  extern __shared__ float smem[];
  const int half = rot / 2;
  float *cos_t = smem, *sin_t = smem + half;
  const int warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  float *head = smem + head_dim + warp * head_dim;
  const int64_t t = blockIdx.x;
  rope_table(pos[t], inv_freq, half, attn_scale, cos_t, sin_t);
  __syncthreads();
  for (int h = warp; h < n_heads; h += n_warps) {
    T *v = x + t * row_stride + int64_t(h) * head_dim;
    rope_head(v, v, static_cast<T *>(nullptr), head, cos_t, sin_t, head_dim, rot, norm_w, eps);
  }
}

// Grid (T, head groups), any block size that is a multiple of 32; waits for the previous kernel itself (pdl_wait),
// after its cos/sin table. The heads of a row, numbered u in [0, n_heads + 2 n_kv_heads) in the qkv layout, are dealt
// to the warps of the token's blocks: u = (group * n_warps + warp) + k * (groups * n_warps). A block whose heads are
// all v heads needs no cos/sin table.
template <class T>
__device__ __forceinline__ void rope_store_token(T *qkv, int n_heads, int n_kv_heads, int head_dim, int rot,
                                                 const int32_t *__restrict__ pos, const float *__restrict__ inv_freq,
                                                 float attn_scale, const float *__restrict__ q_norm,
                                                 const float *__restrict__ k_norm, float eps,
                                                 const int32_t *__restrict__ slot, T *__restrict__ k_cache,
                                                 T *__restrict__ v_cache) {
  extern __shared__ float smem[];
  const int half = rot / 2;
  float *cos_t = smem, *sin_t = smem + half;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  float *head = smem + head_dim + warp * head_dim;
  const int64_t t = blockIdx.x;
  const int n_rope = n_heads + n_kv_heads, n_units = n_rope + n_kv_heads;
  const int first = blockIdx.y * n_warps, step = gridDim.y * n_warps;
  // The table before the PDL wait: pos and inv_freq are the step's inputs, not an earlier kernel's output, and
  // its double-precision sincos then runs under the q|k|v product.
  if (first < n_rope) rope_table(pos[t], inv_freq, half, attn_scale, cos_t, sin_t);  // the same for the whole block
  pdl_wait();
  if (first < n_rope) __syncthreads();
  T *row = qkv + t * int64_t(n_units) * head_dim;
  const int32_t s = slot[t];
  const int64_t cache_row = int64_t(s) * n_kv_heads * head_dim;  // meaningless when s < 0, then unused
  for (int u = first + warp; u < n_units; u += step) {
    T *v = row + int64_t(u) * head_dim;
    if (u < n_heads) {
      rope_head(v, v, static_cast<T *>(nullptr), head, cos_t, sin_t, head_dim, rot, q_norm, eps);
    } else if (u < n_rope) {
      T *copy = s >= 0 ? k_cache + cache_row + int64_t(u - n_heads) * head_dim : nullptr;
      rope_head(v, v, copy, head, cos_t, sin_t, head_dim, rot, k_norm, eps);
    } else if (s >= 0) {
      T *dst = v_cache + cache_row + int64_t(u - n_rope) * head_dim;
      for (int i = lane; i < head_dim; i += 32) dst[i] = v[i];
    }
  }
}

}  // namespace vtk
