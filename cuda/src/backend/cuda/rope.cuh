// Rotary embedding in place, HF "rotate_half" (NeoX) layout, optionally preceded by Qwen3's per-head RMSNorm
// of q or k (norm_w != nullptr), fused so each head vector is read and written once.
//   rope:       x(T, n_heads, head_dim) with rows row_stride elements apart (a fused qkv buffer works), pos(T),
//               inv_freq(head_dim / 2) with any scaling already applied, cos/sin multiplied by attn_scale.
//   rope_store: the decode step's three launches in one, over a fused qkv(T, (n_heads + 2 n_kv_heads) head_dim)
//               whose rows are [q heads | k heads | v heads]: rope (with q_norm) on the q heads, rope (with
//               k_norm) on the k heads, both in place, and the roped k and the v heads of token t copied to the
//               cache row slot[t] (slot < 0: padding, nothing stored). The cache (n_slots, n_kv_heads, head_dim).
// Each token's cos/sin table is computed into shared memory from the angle pos · inv_freq formed in double
// like the CPU op (an fp32 product is off by ~1e-4 rad at positions in the thousands); then each warp takes
// whole heads, stages the (normed) head in shared memory and rotates pairs (i, i + half), which live in
// different lanes. Both kernels rotate a head through the same rope_head(), so rope_store's q, k and cache
// rows are bit for bit those of rope + rope + kv_store.
// Dynamic shared memory: (head_dim + n_warps * head_dim) floats.
#pragma once

#include "common.cuh"

namespace vtk {

// cos_t/sin_t(head_dim / 2) for position p; every thread of the block takes part, the caller syncs.
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

// A head's norm weight as a warp holds it: lane l's elements w[k] = ptr[l + 32 k] in registers when head_dim <= 32 *
// kNormRegs (every head the loader takes in practice), else read from ptr when used. Loaded ahead of use:
// rope_store loads the first head's before its PDL wait, so that read is not on the path after the q|k|v product.
constexpr int kNormRegs = 8;
struct HeadNorm {
  const float *ptr = nullptr;  // null: no norm
  bool in_regs = false;
  float w[kNormRegs];
};
__device__ __forceinline__ HeadNorm head_norm(const float *__restrict__ norm_w, int head_dim) {
  HeadNorm h;
  h.ptr = norm_w;
  h.in_regs = norm_w && head_dim <= 32 * kNormRegs;
  const int lane = threadIdx.x & 31;
  if (h.in_regs)
#pragma unroll
    for (int k = 0; k < kNormRegs; ++k) h.w[k] = lane + 32 * k < head_dim ? norm_w[lane + 32 * k] : 0.f;
  return h;
}

// One warp: the head src(head_dim) normed (norm.ptr != nullptr) and rotated, the result written to dst (src
// itself for in place) and to copy (the cache row), each when not null. head: this warp's head_dim floats of
// shared memory. The products are fused explicitly so every caller rounds alike.
template <class T>
__device__ __forceinline__ void rope_head(const T *src, T *dst, T *copy, float *head, const float *cos_t,
                                          const float *sin_t, int head_dim, const HeadNorm &norm, float eps) {
  const int lane = threadIdx.x & 31, half = head_dim / 2;
  float ss = 0.f;
  for (int i = lane; i < head_dim; i += 32) {
    const float e = to_f32(src[i]);
    head[i] = e;
    ss = fmaf(e, e, ss);
  }
  if (norm.ptr) {  // the same for the whole warp
    const float inv = 1.f / sqrtf(warp_sum(ss) / float(head_dim) + eps);
    if (norm.in_regs) {
#pragma unroll
      for (int k = 0; k < kNormRegs; ++k)
        if (lane + 32 * k < head_dim) head[lane + 32 * k] = head[lane + 32 * k] * inv * norm.w[k];
    } else {
      for (int i = lane; i < head_dim; i += 32) head[i] = head[i] * inv * norm.ptr[i];
    }
  }
  __syncwarp();
  for (int i = lane; i < half; i += 32) {
    const float a = head[i], b = head[i + half];
    const T lo = from_f32<T>(fmaf(a, cos_t[i], -(b * sin_t[i])));
    const T hi = from_f32<T>(fmaf(b, cos_t[i], a * sin_t[i]));
    if (dst) dst[i] = lo, dst[i + half] = hi;
    if (copy) copy[i] = lo, copy[i + half] = hi;
  }
  __syncwarp();  // the next head overwrites this warp's staging area
}

// Grid (T), any block size that is a multiple of 32.
template <class T>
__device__ __forceinline__ void rope_token(T *x, int n_heads, int head_dim, int64_t row_stride,
                                           const int32_t *__restrict__ pos, const float *__restrict__ inv_freq,
                                           float attn_scale, const float *__restrict__ norm_w, float eps) {
  extern __shared__ float smem[];
  const int half = head_dim / 2;
  float *cos_t = smem, *sin_t = smem + half;
  const int warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  float *head = smem + head_dim + warp * head_dim;
  const int64_t t = blockIdx.x;
  rope_table(pos[t], inv_freq, half, attn_scale, cos_t, sin_t);
  __syncthreads();
  const HeadNorm norm = head_norm(norm_w, head_dim);
  for (int h = warp; h < n_heads; h += n_warps) {
    T *v = x + t * row_stride + int64_t(h) * head_dim;
    rope_head(v, v, static_cast<T *>(nullptr), head, cos_t, sin_t, head_dim, norm, eps);
  }
}

// Grid (T, head groups), any block size that is a multiple of 32; waits for the previous kernel itself (pdl_wait)
// after its cos/sin table. The heads of a row, numbered u in
// [0, n_heads + 2 n_kv_heads) in the qkv layout, are dealt to the warps of the token's blocks: u = (group *
// n_warps + warp) + k * (groups * n_warps). A block whose heads are all v heads needs no cos/sin table.
template <class T>
__device__ __forceinline__ void rope_store_token(T *qkv, int n_heads, int n_kv_heads, int head_dim,
                                                 const int32_t *__restrict__ pos, const float *__restrict__ inv_freq,
                                                 float attn_scale, const float *__restrict__ q_norm,
                                                 const float *__restrict__ k_norm, float eps,
                                                 const int32_t *__restrict__ slot, T *__restrict__ k_cache,
                                                 T *__restrict__ v_cache) {
  extern __shared__ float smem[];
  const int half = head_dim / 2;
  float *cos_t = smem, *sin_t = smem + half;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  float *head = smem + head_dim + warp * head_dim;
  const int64_t t = blockIdx.x;
  const int n_rope = n_heads + n_kv_heads, n_units = n_rope + n_kv_heads;
  const int first = blockIdx.y * n_warps, step = gridDim.y * n_warps;
  // Before the PDL wait, what no kernel of the step writes: the table (pos and inv_freq are the step's inputs; its
  // double-precision sincos then runs under the q|k|v product), the warp's first head's norm weight and the slot.
  if (first < n_rope) rope_table(pos[t], inv_freq, half, attn_scale, cos_t, sin_t);  // the same for the whole block
  const int u0 = first + warp;
  auto norm_of = [&](int u) { return head_norm(u < n_heads ? q_norm : u < n_rope ? k_norm : nullptr, head_dim); };
  const HeadNorm norm0 = norm_of(u0);
  const int32_t s = slot[t];
  pdl_wait();
  if (first < n_rope) __syncthreads();
  T *row = qkv + t * int64_t(n_units) * head_dim;
  const int64_t cache_row = int64_t(s) * n_kv_heads * head_dim;  // meaningless when s < 0, then unused
  for (int u = first + warp; u < n_units; u += step) {
    T *v = row + int64_t(u) * head_dim;
    if (u < n_heads) {
      rope_head(v, v, static_cast<T *>(nullptr), head, cos_t, sin_t, head_dim, u == u0 ? norm0 : norm_of(u), eps);
    } else if (u < n_rope) {
      T *copy = s >= 0 ? k_cache + cache_row + int64_t(u - n_heads) * head_dim : nullptr;
      rope_head(v, v, copy, head, cos_t, sin_t, head_dim, u == u0 ? norm0 : norm_of(u), eps);
    } else if (s >= 0) {
      T *dst = v_cache + cache_row + int64_t(u - n_rope) * head_dim;
      for (int i = lane; i < head_dim; i += 32) dst[i] = v[i];
    }
  }
}

}  // namespace vtk
