// Split-K paged attention, shaped for decode, with the contract of cpu::attention (see attention.cuh for the
// cache layout and the ragged batch) for any rows, prefill rows included.
//
// Grid (T rows, n_kv_heads, n_splits), 4 warps. A block owns one split of one row's keys for one kv head and
// every query head of its GQA group: each key and value is read from the cache once per kv head, which is the
// bandwidth floor of decode. The grid depends only on host values fixed for a captured batch (the split count
// comes from T, n_kv_heads, the SM count and the max_keys bound), so a CUDA graph can replay it with new
// metadata. The split length does not: each row divides its actual key count n_keys into
// n_active = ceil(n_keys / len) <= n_splits splits of len keys, len the smallest multiple of kSplitKeys that
// needs no more than min(n_splits, ceil(n_keys / split_keys)) splits (split_keys: the shortest split the host
// allows, a multiple of kSplitKeys; kSplitKeys itself unless VT_CUDA_SPLIT_KEYS). A short row under a graph
// captured for long contexts so still runs its keys as short splits spread over the SMs, and blocks of splits
// past n_active return at once.
//
// Inside a block the 4 warps take turns over the split's keys (16 at a time on tensor cores for bf16 with
// head_dim 64/128/256 and aligned caches, attention_mma.cuh; else 4 at a time on CUDA cores, one head after
// the other), each keeping an online softmax (max m, sum l, unnormalised acc) in fp32, in the log2 domain.
// The warps' states meet in shared memory and are merged. A row with one active split writes its output
// there; otherwise the block stores its partial (m, l, acc) to the workspace and takes a ticket, and the
// block that takes the last ticket of its (row, kv head) merges the n_active partials in split order, so the
// result does not depend on which block finished last. That block also resets the ticket, so the tickets are
// zero between launches (the caller zeroes them once). This saves a second launch (and its graph node) per
// layer: at batch 1 a launch's fixed cost is of the order of the whole attention's.
//
// The cluster form (CLUSTER = kSplitCluster, sm_90+, for steps of few rows: Ops::attention_decode picks it) has
// exactly kSplitCluster splits per (row, kv head), one thread-block cluster, and merges them through distributed
// shared memory instead (cluster_merge): no partials, fence or ticket. 1.034x at Qwen3-0.6B batch 1 on the H200
// (bench/RESULTS.md session 9).
#pragma once

#include "attention_mma.cuh"
#include "attention_row.cuh"
#include "common.cuh"

namespace vtk {

constexpr int kSplitWarps = 4;
constexpr int kSplitKeys = 64;    // split lengths are multiples of this: one 16-key tensor-core step per warp
constexpr int kMaxSplits = 256;   // the host never asks for more (the merge keeps 8 per lane)
constexpr int kSimtKeys = 4;      // keys per warp step on CUDA cores
constexpr int kSplitCluster = 8;  // the cluster form's splits (the portable cluster size)

// The CUDA-core warp (fp32 activations, and bf16 head dims or alignments the tensor-core warp does not take):
// the same state as mma_warp_states, for any head_dim <= 32 * VPL. Lane i holds dims i, i + 32, ... (below
// head_dim), read one element at a time, so any head_dim and alignment work. Heads are walked one after the
// other, each reading the split's keys again (from L2): this path is for correctness, not speed.
template <class T, int VPL, int NW>
__device__ __forceinline__ void simt_warp_states(const T *__restrict__ qrow, const T *__restrict__ k_cache,
                                                 const T *__restrict__ v_cache, const int32_t *__restrict__ table,
                                                 int block_size, int64_t slot_stride, int64_t kv_off, int G, int hd,
                                                 float scale_log2, int k0, int k1, float *s_m, float *s_l,
                                                 float *s_acc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int g = 0; g < G; ++g) {
    const T *qh = qrow + int64_t(g) * hd;
    float qv[VPL], acc[VPL];
#pragma unroll
    for (int i = 0; i < VPL; ++i) {
      const int d = lane + 32 * i;
      qv[i] = d < hd ? to_f32(qh[d]) * scale_log2 : 0.f;
      acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int p0 = k0 + warp * kSimtKeys; p0 < k1; p0 += NW * kSimtKeys) {
      const T *kp[kSimtKeys], *vp[kSimtKeys];
#pragma unroll
      for (int j = 0; j < kSimtKeys; ++j) {
        const int64_t off = kv_row_offset(table, block_size, slot_stride, kv_off, min(p0 + j, k1 - 1));
        kp[j] = k_cache + off;  // past k1: the last valid key again, masked below
        vp[j] = v_cache + off;
      }
      float kf[kSimtKeys][VPL], vf[kSimtKeys][VPL];
#pragma unroll
      for (int j = 0; j < kSimtKeys; ++j)
#pragma unroll
        for (int i = 0; i < VPL; ++i) {
          const int d = lane + 32 * i;
          kf[j][i] = d < hd ? load_kv_elem(kp[j] + d) : 0.f;
          vf[j][i] = d < hd ? load_kv_elem(vp[j] + d) : 0.f;
        }
      float sc[kSimtKeys];
#pragma unroll
      for (int j = 0; j < kSimtKeys; ++j) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < VPL; ++i) dot = fmaf(qv[i], kf[j][i], dot);
        dot = warp_sum(dot);  // every lane takes part: the shuffles need the whole warp
        sc[j] = p0 + j < k1 ? dot : -INFINITY;
      }
      online_softmax_step<true>(sc, vf, m, l, acc);  // key p0 is valid
    }
    const int st = warp * G + g;
    if (lane == 0) s_m[st] = m, s_l[st] = l;
#pragma unroll
    for (int i = 0; i < VPL; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) s_acc[st * hd + d] = acc[i];
    }
  }
}

// The cluster form's end (CLUSTER splits of one (row, kv head), one thread-block cluster, sm_90+): each block merges
// its warps into its split's state (m, l, acc in the log2 domain; an idle block: m = -inf, l = acc = 0) in its own
// shared memory (part: G m, G l, G * hd acc floats), then block r writes the r-th slice of the G * hd outputs,
// merging the CLUSTER states read through distributed shared memory in split order, with the ticket merge's
// arithmetic (weights exp2(m - max) / l, then the weighted sum in split order). No partials in global memory, no
// fence or ticket: at batch 1 the ticket merge's chain (store, fence, atomic, L2 reads in the last block) is most
// of what the attention adds to a step. An idle block never waits for the previous kernel (it reads no key), yet
// writes its slice of the outputs: only after the cluster barrier, which split 0 (always active) reaches after its
// PDL wait, so its writes too come after every earlier kernel has completed.
template <class T, int CLUSTER>
__device__ __forceinline__ void cluster_merge(bool active, int G, int hd, const float *s_m, const float *s_l,
                                              const float *s_acc, float *part, T *__restrict__ out) {
  float *p_m = part, *p_l = part + G, *p_acc = part + 2 * G;
  for (int i = threadIdx.x; i < G * hd; i += blockDim.x) {
    const int g = i / hd, d = i - g * hd;
    float mx = -INFINITY, l = 0.f, a = 0.f;
    if (active) {
#pragma unroll
      for (int w = 0; w < kSplitWarps; ++w) mx = fmaxf(mx, s_m[w * G + g]);  // finite: warp 0 had key k0
#pragma unroll
      for (int w = 0; w < kSplitWarps; ++w) {
        const float c = exp2f(s_m[w * G + g] - mx);  // 0 for a warp without keys
        l = fmaf(c, s_l[w * G + g], l);
        a = fmaf(c, s_acc[(w * G + g) * hd + d], a);
      }
    }
    p_acc[i] = a;
    if (d == 0) p_m[g] = mx, p_l[g] = l;
  }
  cluster_arrive();
  cluster_wait();  // every split's state visible
  const int n_cols = G * hd, per = (n_cols + CLUSTER - 1) / CLUSTER;
  const unsigned rank = cluster_rank();
  const int c1 = min(n_cols, int(rank + 1) * per);
  for (int i = int(rank) * per + threadIdx.x; i < c1; i += blockDim.x) {
    const int g = i / hd;
    float m[CLUSTER], mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) m[r] = cluster_load(&p_m[g], unsigned(r)), mx = fmaxf(mx, m[r]);
    float l = 0.f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
      m[r] = exp2f(m[r] - mx);  // 0 for an idle split (m = -inf; split 0 always has keys, so mx is finite)
      l = fmaf(m[r], cluster_load(&p_l[g], unsigned(r)), l);
    }
    const float inv = 1.f / l;
    float a = 0.f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) a = fmaf(m[r] * inv, cluster_load(&p_acc[i], unsigned(r)), a);
    out[i] = from_f32<T>(a);
  }
  cluster_arrive();
  cluster_wait();  // no block leaves while another may still read its part
}

__host__ __device__ constexpr int64_t split_smem_floats(int G, int head_dim, int n_splits) {
  return kSplitWarps * G * (head_dim + 2) > G * n_splits ? kSplitWarps * G * (head_dim + 2) : G * n_splits;
}

// The whole block, its PDL wait included (the entry points only trigger): it reads the step's integers (the rows'
// sequences and key counts, the block tables) and its first keys before the wait, since no kernel of the step writes
// them (common.cuh's pdl_wait), and only the keys of this step (from the sequence's pos0 on, which rope_store has
// just written) after it. MMA_HD > 0: the tensor-core warp for that head_dim (T = bf16); 0: the CUDA-core warp with
// VPL, which waits first. Workspace: tickets (T, n_kv_heads) uint32, part_ml (T, n_heads, n_splits, 2) floats (m, l),
// part_acc (T, n_heads, n_splits, head_dim) floats; unused when n_splits == 1. Dynamic shared memory:
// split_smem_floats floats.
template <class T, int VPL, int MMA_HD, int CLUSTER = 0>
__device__ __forceinline__ void attention_split(const T *__restrict__ q, int64_t q_row_stride,
                                                const T *__restrict__ k_cache, const T *__restrict__ v_cache,
                                                const int32_t *__restrict__ seq_q_start,
                                                const int32_t *__restrict__ seq_pos0,
                                                const int32_t *__restrict__ block_tables, int n_seqs, int max_blocks,
                                                int block_size, int n_heads, int n_kv_heads, int head_dim, float scale,
                                                int n_splits, unsigned *__restrict__ tickets,
                                                float *__restrict__ part_ml, float *__restrict__ part_acc,
                                                T *__restrict__ out, int split_keys) {
  extern __shared__ float smem[];
  __shared__ bool s_last;
  const int row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const int lo = row_sequence(row, seq_q_start, n_seqs);
  const int fresh = seq_pos0[lo];  // keys from here on are this step's
  const int n_keys = fresh + (row - seq_q_start[lo]) + 1;
  const int want = min(n_splits, (n_keys + split_keys - 1) / split_keys);
  const int len = ((n_keys + want - 1) / want + kSplitKeys - 1) / kSplitKeys * kSplitKeys;
  const int n_active = (n_keys + len - 1) / len;  // <= want
  const bool active = split < n_active;  // a cluster's idle blocks stay for its barriers
  if (!CLUSTER && !active) return;
  const int k0 = split * len, k1 = min(k0 + len, n_keys);

  const int G = n_heads / n_kv_heads, hd = MMA_HD ? MMA_HD : head_dim;
  float *s_m = smem, *s_l = smem + kSplitWarps * G, *s_acc = smem + 2 * kSplitWarps * G;
  const T *qrow = q + int64_t(row) * q_row_stride + int64_t(kvh) * G * hd;
  const int32_t *table = block_tables + int64_t(lo) * max_blocks;
  const int64_t slot_stride = int64_t(n_kv_heads) * hd, kv_off = int64_t(kvh) * hd;
  const float scale_log2 = scale * 1.4426950408889634f;
  if constexpr (CLUSTER > 0) {
    static_assert(MMA_HD > 0, "the cluster form is the tensor-core warp's");
    if (active)
      mma_warp_states<MMA_HD, kSplitWarps>(qrow, k_cache, v_cache, table, block_size, slot_stride, kv_off, G,
                                           scale_log2, k0, k1, fresh, s_m, s_l, s_acc);
  } else if constexpr (MMA_HD > 0) {
    mma_warp_states<MMA_HD, kSplitWarps>(qrow, k_cache, v_cache, table, block_size, slot_stride, kv_off, G,
                                         scale_log2, k0, k1, fresh, s_m, s_l, s_acc);
  } else {
    pdl_wait();
    simt_warp_states<T, VPL, kSplitWarps>(qrow, k_cache, v_cache, table, block_size, slot_stride, kv_off, G, hd,
                                          scale_log2, k0, k1, s_m, s_l, s_acc);
  }
  __syncthreads();

  const int64_t head0 = int64_t(row) * n_heads + int64_t(kvh) * G;  // the group's first (row, head)
  if constexpr (CLUSTER > 0) {
    cluster_merge<T, CLUSTER>(active, G, hd, s_m, s_l, s_acc, smem + kSplitWarps * G * (hd + 2), out + head0 * hd);
  } else {
    // Merge the warps: the output when the row has one split, else this split's partial.
    for (int i = threadIdx.x; i < G * hd; i += blockDim.x) {
      const int g = i / hd, d = i - g * hd;
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kSplitWarps; ++w) mx = fmaxf(mx, s_m[w * G + g]);  // finite: warp 0 had key k0
      float l = 0.f, a = 0.f;
#pragma unroll
      for (int w = 0; w < kSplitWarps; ++w) {
        const float c = exp2f(s_m[w * G + g] - mx);  // 0 for a warp without keys
        l = fmaf(c, s_l[w * G + g], l);
        a = fmaf(c, s_acc[(w * G + g) * hd + d], a);
      }
      if (n_active == 1) {
        out[(head0 + g) * hd + d] = from_f32<T>(a / l);
      } else {
        const int64_t ps = (head0 + g) * n_splits + split;
        part_acc[ps * hd + d] = a;
        if (d == 0) part_ml[2 * ps] = mx, part_ml[2 * ps + 1] = l;
      }
    }
    if (n_active == 1) return;

    // Ticket: the partial stores of every thread are ordered before thread 0's fence and increment (the fence is
    // cumulative over what the barrier made visible to it), and the last block reads them after its own fence.
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned *ticket = tickets + (int64_t(row) * n_kv_heads + kvh);
      __threadfence();
      const bool last = atomicAdd(ticket, 1u) == unsigned(n_active - 1);
      if (last) {
        atomicExch(ticket, 0u);  // every block of this (row, kv head) has counted: ready for the next launch
        __threadfence();
      }
      s_last = last;
    }
    __syncthreads();
    if (!s_last) return;

    // Weights of the splits per head (shared memory (G, n_active), the warp states no longer needed): lane i
    // holds splits i, i + 32, ... (n_active <= kMaxSplits = 32 * 8). Partials are read through L2 (__ldcg): they
    // were written by other SMs during this launch.
    float *s_w = smem;
    for (int g = warp; g < G; g += kSplitWarps) {
      const float *ml = part_ml + 2 * (head0 + g) * n_splits;
      float mv[kMaxSplits / 32], lv[kMaxSplits / 32];
      float mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < kMaxSplits / 32; ++k) {
        const int sp = lane + 32 * k;
        mv[k] = sp < n_active ? __ldcg(ml + 2 * sp) : -INFINITY;
        lv[k] = sp < n_active ? __ldcg(ml + 2 * sp + 1) : 0.f;
        mx = fmaxf(mx, mv[k]);
      }
      mx = warp_max(mx);
      float l = 0.f;
#pragma unroll
      for (int k = 0; k < kMaxSplits / 32; ++k) {
        mv[k] = exp2f(mv[k] - mx);  // 0 past n_active
        l = fmaf(mv[k], lv[k], l);
      }
      const float inv = 1.f / warp_sum(l);
#pragma unroll
      for (int k = 0; k < kMaxSplits / 32; ++k)
        if (lane + 32 * k < n_active) s_w[g * n_active + lane + 32 * k] = mv[k] * inv;
    }
    __syncthreads();

    // out = sum over splits, in split order, of weight * acc. Each thread takes 4 columns at once and loads 8
    // splits of each before using any, so 32 L2 reads are in flight rather than one.
    constexpr int kCols = 4, kSplitBatch = 8;
    const int n_cols = G * hd;
    for (int i0 = threadIdx.x; i0 < n_cols; i0 += kCols * blockDim.x) {
      const float *src[kCols];
      const float *wt[kCols];
      float a[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int i = min(i0 + c * int(blockDim.x), n_cols - 1);  // a column past the end repeats the last one
        const int g = i / hd, d = i - g * hd;
        src[c] = part_acc + (head0 + g) * n_splits * hd + d;
        wt[c] = s_w + g * n_active;
        a[c] = 0.f;
      }
      for (int s0 = 0; s0 < n_active; s0 += kSplitBatch) {
        float v[kCols][kSplitBatch];
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
          for (int j = 0; j < kSplitBatch; ++j)
            v[c][j] = s0 + j < n_active ? __ldcg(src[c] + int64_t(s0 + j) * hd) : 0.f;
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
          for (int j = 0; j < kSplitBatch; ++j)
            if (s0 + j < n_active) a[c] = fmaf(wt[c][s0 + j], v[c][j], a[c]);
      }
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int i = i0 + c * int(blockDim.x);
        if (i < n_cols) {
          const int g = i / hd, d = i - g * hd;
          out[(head0 + g) * hd + d] = from_f32<T>(a[c]);
        }
      }
    }
  }
}

}  // namespace vtk
