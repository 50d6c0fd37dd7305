// The bf16 tensor-core warp of split-K decode attention (attention_split.cuh): one warp walks its share of a
// split's keys, 16 at a time, for all G <= 8 query heads of one kv head, with mma.sync m16n8k16 (bf16 in,
// fp32 accumulate; sm_80 and newer). On CUDA cores the same work takes ~70 warp instructions per key for a
// GQA group of 4 (dot products, their warp reductions, a softmax repeated on every lane): by estimate about
// as long as streaming the keys from DRAM at batch 32, so it could not hide under the loads. Here it is ~10.
//
// Both products are taken transposed so that the 16-row side of the mma holds keys or head dims, never the
// (at most 8) query heads:
//   S^T (16 keys x 8 heads) = K (16 keys x HD) . Q^T      A = K rows,   B = q of head g (lane group g)
//   O^T (HD x 8 heads)     += V^T (HD x 16 keys) . P^T    A = V^T,      B = P^T
// Operands come straight from global memory in registers, no shared memory: lane (g = lane / 4, t = lane % 4)
// loads 16 bytes = dims [32b + 8t, 32b + 8t + 8) of key g and of key g + 8, for every 32-dim block b. A dot
// product may visit the dims in any order as long as Q and K agree, so for the first k16 step of block b the
// mma's k index 2t + e is taken to be dim 32b + 8t + e and 2t + 8 + e dim 32b + 8t + 2 + e; the second step
// covers 8t + 4 .. 8t + 7 the same way. Each lane's 16-byte load then is exactly its A (K) and B (q)
// registers. For PV the mma wants two keys of one dim in a register: each 32-bit register of a V load is an
// 8x8 (keys x dims) tile in mma fragment layout, and movmatrix transposes it into V^T rows; P^T's
// accumulator layout (key g, heads 2t, 2t + 1) is transposed the same way into B's (keys 2t, 2t + 1, head g).
// Which physical dim a V^T row is follows from the two permutations; the state write-out below spells it out.
//
// Softmax is online and in the log2 domain (scores are multiplied by scale * log2(e), exp2 throughout). P is
// rounded to bf16 for the mma and the running sum l adds the rounded values, so the output is an exact
// weighted mean of the values (weights within 2^-9 of the softmax).
#pragma once

#include "common.cuh"
#include "tensor_core.cuh"

namespace vtk {

// Key p's row of kv head (kv_off) in a paged cache, in elements.
__device__ __forceinline__ int64_t kv_row_offset(const int32_t *__restrict__ table, int block_size, int64_t slot_stride,
                                                 int64_t kv_off, int p) {
  const int64_t slot = int64_t(__ldg(table + p / block_size)) * block_size + p % block_size;
  return slot * slot_stride + kv_off;
}

// Keys [k0, k1) of one (row, kv head), NW warps taking 16-key steps in turn. qrow: the group's G query heads
// (G * HD contiguous elements). Writes each warp's state for heads g < G to shared memory:
// s_m[w * G + g], s_l[...] (log2 domain) and s_acc[(w * G + g) * HD + d] (unnormalised). A warp with no keys
// writes m = -inf, l = 0, acc = 0. Cache rows must be 16-byte aligned (HD % 32 == 0 and an aligned base).
// The PDL wait is here: each warp loads the keys of its first step that come before `fresh` (earlier steps' keys,
// which no kernel of this step writes), then waits, then loads q and the rest of that step (keys from `fresh` on,
// written by this step's rope_store). So a decode step's KV reads overlap the kernels before the attention, and
// only q and the row's own key are read after them.
template <int HD, int NW>
__device__ __forceinline__ void mma_warp_states(const bf16 *__restrict__ qrow, const bf16 *__restrict__ k_cache,
                                                const bf16 *__restrict__ v_cache, const int32_t *__restrict__ table,
                                                int block_size, int64_t slot_stride, int64_t kv_off, int G,
                                                float scale_log2, int k0, int k1, int fresh, float *s_m, float *s_l,
                                                float *s_acc) {
  static_assert(HD % 32 == 0 && HD <= 256, "head_dim in 32-dim blocks");
  constexpr int NB = HD / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;

  // A step's keys: lane (g, t) holds keys base + g (a) and base + g + 8 (b). Keys past k1 load key k0 instead
  // (valid, so finite: an unused slot may hold anything) and are masked below. load_a / load_b: whether this
  // call loads that key (the first step comes in two calls, around the wait).
  uint4 ka[NB], kb[NB], va[NB], vb[NB];
  auto load_key = [&](int p, uint4 (&kr)[NB], uint4 (&vr)[NB]) {  // this lane's part of key p and its value
    const int64_t o = kv_row_offset(table, block_size, slot_stride, kv_off, p) + 8 * t;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      kr[b] = load_kv(reinterpret_cast<const uint4 *>(k_cache + o + 32 * b));
      vr[b] = load_kv(reinterpret_cast<const uint4 *>(v_cache + o + 32 * b));
    }
  };
  auto load_step = [&](int base, bool load_a, bool load_b) {
    const int pa = base + g < k1 ? base + g : k0, pb = base + g + 8 < k1 ? base + g + 8 : k0;
    if (load_a) load_key(pa, ka, va);
    if (load_b) load_key(pb, kb, vb);
  };
  int base = k0 + warp * 16;
  {
    const int pa = base + g < k1 ? base + g : k0, pb = base + g + 8 < k1 ? base + g + 8 : k0;
    if (base < k1) load_step(base, pa < fresh, pb < fresh);
    pdl_wait();
    if (base < k1) load_step(base, pa >= fresh, pb >= fresh);
  }

  // B operand of S^T: head g's q over this lane's 8 dims of each block (zero for heads past the group).
  uint32_t qf[NB][4];
  {
    const bool live = g < G;
    const uint16_t *qh = reinterpret_cast<const uint16_t *>(qrow) + (live ? g : 0) * HD + 8 * t;
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        qf[b][i] = live ? uint32_t(qh[32 * b + 2 * i]) | uint32_t(qh[32 * b + 2 * i + 1]) << 16 : 0u;
  }

  // O^T accumulators: block b, half u (virtual rows from V registers 2u and 2u + 1), heads 2t and 2t + 1.
  float acc[NB][2][4];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[b][u][i] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // heads 2t, 2t + 1; same on the 8 lanes of a t

  for (; base < k1; base += NW * 16) {
    if (base != k0 + warp * 16) load_step(base, true, true);  // the first step is loaded above

    // s[0], s[1]: key g, heads 2t, 2t + 1; s[2], s[3]: key g + 8.
    float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      mma_bf16_16816(s, ka[b].x, kb[b].x, ka[b].y, kb[b].y, qf[b][0], qf[b][1]);
      mma_bf16_16816(s, ka[b].z, kb[b].z, ka[b].w, kb[b].w, qf[b][2], qf[b][3]);
    }
    const bool key_a = base + g < k1, key_b = base + g + 8 < k1;
    s[0] = key_a ? s[0] * scale_log2 : -INFINITY;
    s[1] = key_a ? s[1] * scale_log2 : -INFINITY;
    s[2] = key_b ? s[2] * scale_log2 : -INFINITY;
    s[3] = key_b ? s[3] * scale_log2 : -INFINITY;

    // Max over the step's 16 keys: the lanes of one t hold them all (keys g and g + 8, g = 0..7).
    float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);  // finite: key `base` is valid
    const float al0 = exp2f(m0 - mn0), al1 = exp2f(m1 - mn1);  // 0 on the first step (m = -inf)
    const uint32_t pa = bf16x2_from_f32(exp2f(s[0] - mn0), exp2f(s[1] - mn1));  // P^T tile, keys 0-7
    const uint32_t pb = bf16x2_from_f32(exp2f(s[2] - mn0), exp2f(s[3] - mn1));  // keys 8-15
    l0 = fmaf(l0, al0, bf16x2_lo(pa) + bf16x2_lo(pb));
    l1 = fmaf(l1, al1, bf16x2_hi(pa) + bf16x2_hi(pb));
    m0 = mn0, m1 = mn1;
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int u = 0; u < 2; ++u) acc[b][u][0] *= al0, acc[b][u][1] *= al1, acc[b][u][2] *= al0, acc[b][u][3] *= al1;

    const uint32_t p0 = transpose_8x8(pa), p1 = transpose_8x8(pb);  // B = P^T: keys 2t, 2t + 1 (+ 8), head g
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const uint32_t ta[4] = {transpose_8x8(va[b].x), transpose_8x8(va[b].y), transpose_8x8(va[b].z),
                              transpose_8x8(va[b].w)};
      const uint32_t tb[4] = {transpose_8x8(vb[b].x), transpose_8x8(vb[b].y), transpose_8x8(vb[b].z),
                              transpose_8x8(vb[b].w)};
      mma_bf16_16816(acc[b][0], ta[0], ta[1], tb[0], tb[1], p0, p1);
      mma_bf16_16816(acc[b][1], ta[2], ta[3], tb[2], tb[3], p0, p1);
    }
  }

#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o);
  }
  const int ha = 2 * t, hb = 2 * t + 1;
  if (g == 0) {
    if (ha < G) s_m[warp * G + ha] = m0, s_l[warp * G + ha] = l0;
    if (hb < G) s_m[warp * G + hb] = m1, s_l[warp * G + hb] = l1;
  }
  // Row g of V^T tile (b, u) came from column g of register 2u of the V loads: dim 32b + 8(g/2) + 2(2u) + g%2;
  // row g + 8 from register 2u + 1: two dims further.
  float *acc_a = s_acc + (warp * G + ha) * HD, *acc_b = s_acc + (warp * G + hb) * HD;
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int d = 32 * b + 8 * (g >> 1) + 4 * u + (g & 1);
      if (ha < G) acc_a[d] = acc[b][u][0], acc_a[d + 2] = acc[b][u][2];
      if (hb < G) acc_b[d] = acc[b][u][1], acc_b[d + 2] = acc[b][u][3];
    }
}

}  // namespace vtk
