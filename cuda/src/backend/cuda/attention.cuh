// Paged attention over one layer's KV cache, causal, GQA, with the contract of cpu::attention (cpu_ops.h):
//   q(T, n_heads, head_dim), out(T, n_heads, head_dim), caches (n_blocks, block_size, n_kv_heads, head_dim), all
//   in the activation type; sequence s owns query rows [seq_q_start[s], seq_q_start[s+1]); row j of it sits at
//   position seq_pos0[s] + j and sees keys 0 .. that position, key p living in slot
//   block_tables[s * max_blocks + p / block_size] * block_size + p % block_size.
// First, simple version, shaped for decode: one block per (query row, head), 4 warps. Each warp walks every
// 4th group of KPW keys with an online softmax in fp32 (running max m, sum l, unnormalised output acc), loading
// the KPW keys' vectors before reducing any of them so KPW loads are in flight. Lane i holds head dims i, i + 32,
// ..., i + 32 * (VPL - 1) (those below head_dim): each load instruction of a warp reads one contiguous run, and
// a lane past head_dim loads nothing. (A first version gave each lane VPL consecutive dims, read as one vector
// with a scalar fallback at the tail; on the H200, for head_dim < 32 * VPL, memcheck saw a 16-byte read by the
// lane at d0 == head_dim, and heads of the last kv head came out NaN from the poisoned next slot.) The warps'
// states are merged through shared memory at the end. No split over the context yet, and each head of a GQA
// group reads the shared kv head itself (from L2): both are later increments.
// Any T works (prefill rows too), so this is also a correct, slow prefill path. q rows are q_row_stride
// elements apart (a fused qkv buffer works).
//
// kv_store: cache[slot[t]] = k[t], v[t] for every token with slot[t] >= 0 (negative: padding, skipped).
#pragma once

#include "attention_row.cuh"
#include "common.cuh"

namespace vtk {

constexpr int kAttnWarps = 4;
constexpr int kKeysPerWarp = 4;

template <class T, int VPL>
__device__ __forceinline__ void paged_attention_row(const T *__restrict__ q, long long q_row_stride,
                                                    const T *__restrict__ k_cache,
                                                    const T *__restrict__ v_cache, const int32_t *__restrict__ seq_q_start,
                                                    const int32_t *__restrict__ seq_pos0,
                                                    const int32_t *__restrict__ block_tables, int n_seqs,
                                                    int max_blocks, int block_size, int n_heads, int n_kv_heads,
                                                    int head_dim, float scale, T *__restrict__ out) {
  __shared__ float s_m[kAttnWarps], s_l[kAttnWarps], s_acc[kAttnWarps][32 * VPL];
  const int h = blockIdx.x, row = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const int s = row_sequence(row, seq_q_start, n_seqs);
  const int n_keys = seq_pos0[s] + (row - seq_q_start[s]) + 1;
  const int32_t *table = block_tables + int64_t(s) * max_blocks;
  const int kvh = h / (n_heads / n_kv_heads);
  const int64_t slot_stride = int64_t(n_kv_heads) * head_dim;

  float qv[VPL], acc[VPL];
  const T *qh = q + int64_t(row) * q_row_stride + int64_t(h) * head_dim;
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < head_dim ? to_f32(qh[d]) * scale : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;

  for (int p0 = warp * kKeysPerWarp; p0 < n_keys; p0 += kAttnWarps * kKeysPerWarp) {
    const T *kp[kKeysPerWarp], *vp[kKeysPerWarp];  // this group's key and value vectors of head kvh
#pragma unroll
    for (int j = 0; j < kKeysPerWarp; ++j) {
      const int p = min(p0 + j, n_keys - 1);  // past the end: reuse the last key, masked below
      const int64_t off =
          (int64_t(table[p / block_size]) * block_size + p % block_size) * slot_stride + int64_t(kvh) * head_dim;
      kp[j] = k_cache + off;
      vp[j] = v_cache + off;
    }
    float kf[kKeysPerWarp][VPL];
#pragma unroll
    for (int j = 0; j < kKeysPerWarp; ++j)
#pragma unroll
      for (int i = 0; i < VPL; ++i) {
        const int d = lane + 32 * i;
        kf[j][i] = d < head_dim ? to_f32(kp[j][d]) : 0.f;
      }
    float sc[kKeysPerWarp];
#pragma unroll
    for (int j = 0; j < kKeysPerWarp; ++j) {
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < VPL; ++i) dot = fmaf(qv[i], kf[j][i], dot);
      dot = warp_sum(dot);  // every lane takes part: the shuffles need the whole warp
      sc[j] = p0 + j < n_keys ? dot : -INFINITY;
    }
    float vf[kKeysPerWarp][VPL];
#pragma unroll
    for (int j = 0; j < kKeysPerWarp; ++j)
#pragma unroll
      for (int i = 0; i < VPL; ++i) {
        const int d = lane + 32 * i;
        vf[j][i] = d < head_dim ? to_f32(vp[j][d]) : 0.f;
      }
    online_softmax_step<false>(sc, vf, m, l, acc);  // key p0 is always valid
  }

  if (lane == 0) s_m[warp] = m, s_l[warp] = l;
#pragma unroll
  for (int i = 0; i < VPL; ++i) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float m_all = s_m[0];
#pragma unroll
  for (int w = 1; w < kAttnWarps; ++w) m_all = fmaxf(m_all, s_m[w]);
  float l_all = 0.f, c[kAttnWarps];
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) l_all += s_l[w] * (c[w] = expf(s_m[w] - m_all));  // a warp with no keys: c = 0
  const float inv = 1.f / l_all;
  T *o = out + (int64_t(row) * n_heads + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float a = 0.f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; ++w) a = fmaf(s_acc[w][d], c[w], a);
    o[d] = from_f32<T>(a * inv);
  }
}

template <class T>
__device__ __forceinline__ void kv_store_token(const T *__restrict__ k, const T *__restrict__ v, int row_elems,
                                               const int32_t *__restrict__ slot, T *__restrict__ k_cache,
                                               T *__restrict__ v_cache) {
  const int64_t t = blockIdx.x;
  const int32_t s = slot[t];
  if (s < 0) return;
  for (int i = threadIdx.x; i < row_elems; i += blockDim.x) {
    k_cache[int64_t(s) * row_elems + i] = k[t * row_elems + i];
    v_cache[int64_t(s) * row_elems + i] = v[t * row_elems + i];
  }
}

}  // namespace vtk
