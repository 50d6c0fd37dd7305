// Greedy sampling on the GPU, so a greedy step copies 8 bytes per row to the host instead of the logits row:
//   argmax: logits(n, vocab) fp32, rows ld elements apart → out_ids(n) int32, the lowest id of the largest
//           value (NaN never wins), and out_logprobs(n) fp32, its log-softmax -log(sum exp(l - max)), the rules
//           of the CPU sampler (sampling.cpp) included: a row of only -inf/NaN gives id 0 and -log(vocab); a row
//           with +inf gives its first +inf and -log(count of +inf); NaN entries carry no probability.
// One block per row, one pass over memory. Each thread keeps an online softmax state (its max m, the id of
// m, s = sum of exp(l - m) over what it has read) and reads its elements in ascending id order, in groups of
// 16 (four 16-byte loads in flight); a group moves m at most once and its 16 terms are summed pairwise
// before they meet s, so s adds a few dozen fp32 sums, not thousands of terms. The block then merges the
// states in a fixed tree (shuffles within warps, then warp 0 over the warps' results), so the result does
// not depend on timing. Error against the CPU's double sum: ~1e-6 for vocab 151,936 (the terms' exp error,
// ~2e-7 each, and log's rounding).
#pragma once

#include "common.cuh"
#include "step_advance.h"

namespace vtk {

constexpr int kArgmaxThreads = 1024;
constexpr int kArgmaxLoads = 4;  // 16-byte loads per thread in flight

struct SoftmaxMax {
  float m;   // the largest value seen; -inf while only -inf and NaN were seen
  int id;    // the lowest id holding m
  float s;   // sum of exp(l - m) over the values seen, NaN excluded
};

// v[0] ← the sum of v[0 .. 2W), added as a balanced tree.
template <int W, int K>
__device__ __forceinline__ void pairwise_sum(float (&v)[K]) {
  if constexpr (W > 0) {
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] += v[j + W];
    pairwise_sum<W / 2>(v);
  }
}

// Folds K values into st; their ids, id_of(0) < id_of(1) < ..., all above every id st has seen.
template <int K, class IdOf>
__device__ __forceinline__ void softmax_max_add(SoftmaxMax &st, float (&v)[K], IdOf id_of) {
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < K; ++j) mx = v[j] > mx ? v[j] : mx;  // NaN never wins
  if (mx > st.m) {  // strictly: an equal value later in id order loses the tie
    int first = K - 1;
#pragma unroll
    for (int j = K - 1; j >= 0; --j) first = v[j] == mx ? j : first;
    st.s *= __expf(st.m - mx);  // st.m = -inf: 0, and s was 0
    st.m = mx;
    st.id = id_of(first);
  }
#pragma unroll
  for (int j = 0; j < K; ++j) v[j] = __expf(fmaxf(v[j] - st.m, -INFINITY));  // -inf, NaN (fmaxf drops it): 0
  pairwise_sum<K / 2>(v);
  st.s += v[0];
}

// a ← the state of a's and b's values together. Commutative in m and id, so only s depends on the order.
__device__ __forceinline__ void softmax_max_merge(SoftmaxMax &a, float bm, int bid, float bs) {
  const float m = fmaxf(a.m, bm);
  const int id = a.m > bm ? a.id : bm > a.m ? bid : min(a.id, bid);
  a.s = (a.m == m ? a.s : a.s * __expf(a.m - m)) + (bm == m ? bs : bs * __expf(bm - m));
  a.m = m, a.id = id;
}

// The row's SoftmaxMax (largest value, its lowest id, sum of exp(l - max)), the same in every thread. One pass;
// the per-thread states merge in a fixed tree, so the result does not depend on timing. Block kArgmaxThreads
// threads (or any multiple of 32 up to 1024, same result up to the sum's rounding); vec: x 16-byte aligned.
__device__ __forceinline__ SoftmaxMax row_softmax_max(const float *__restrict__ x, int vocab, int vec) {
  __shared__ float s_m[32], s_s[32];
  __shared__ int s_id[32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, n_warps = blockDim.x >> 5;
  const int stride = blockDim.x;
  SoftmaxMax st{-INFINITY, 0, 0.f};

  if (vec) {
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    const int n4 = vocab >> 2, group = kArgmaxLoads * stride;
    int q0 = 0;
    for (; q0 + group <= n4; q0 += group) {  // whole groups: thread tid reads float4 q0 + tid + u * stride
      float v[4 * kArgmaxLoads];
#pragma unroll
      for (int u = 0; u < kArgmaxLoads; ++u) {
        const float4 f = load_stream(x4 + q0 + tid + u * stride);
        v[4 * u] = f.x, v[4 * u + 1] = f.y, v[4 * u + 2] = f.z, v[4 * u + 3] = f.w;
      }
      softmax_max_add(st, v, [&](int j) { return 4 * (q0 + tid + (j >> 2) * stride) + (j & 3); });
    }
    for (int q = q0 + tid; q < n4; q += stride) {
      const float4 f = load_stream(x4 + q);
      float v[4] = {f.x, f.y, f.z, f.w};
      softmax_max_add(st, v, [&](int j) { return 4 * q + j; });
    }
    const int i = 4 * n4 + tid;  // the last vocab % 4 values
    if (i < vocab) {
      float v[1] = {x[i]};
      softmax_max_add(st, v, [&](int) { return i; });
    }
  } else {
    constexpr int K = 4 * kArgmaxLoads;
    const int group = K * stride;
    int i0 = 0;
    for (; i0 + group <= vocab; i0 += group) {
      float v[K];
#pragma unroll
      for (int j = 0; j < K; ++j) v[j] = x[i0 + tid + j * stride];
      softmax_max_add(st, v, [&](int j) { return i0 + tid + j * stride; });
    }
    for (int i = i0 + tid; i < vocab; i += stride) {
      float v[1] = {x[i]};
      softmax_max_add(st, v, [&](int) { return i; });
    }
  }

#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float bm = __shfl_down_sync(0xffffffffu, st.m, o), bs = __shfl_down_sync(0xffffffffu, st.s, o);
    const int bid = __shfl_down_sync(0xffffffffu, st.id, o);
    softmax_max_merge(st, bm, bid, bs);  // lanes >= 32 - o merge junk; only lane 0's result is used
  }
  if (lane == 0) s_m[warp] = st.m, s_s[warp] = st.s, s_id[warp] = st.id;
  __syncthreads();
  if (warp == 0) {
    st = lane < n_warps ? SoftmaxMax{s_m[lane], s_id[lane], s_s[lane]} : SoftmaxMax{-INFINITY, 0, 0.f};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float bm = __shfl_down_sync(0xffffffffu, st.m, o), bs = __shfl_down_sync(0xffffffffu, st.s, o);
      const int bid = __shfl_down_sync(0xffffffffu, st.id, o);
      softmax_max_merge(st, bm, bid, bs);
    }
  }
  __syncthreads();  // every warp has read s_m/s_s/s_id
  if (tid == 0) s_m[0] = st.m, s_s[0] = st.s, s_id[0] = st.id;
  __syncthreads();
  return SoftmaxMax{s_m[0], s_id[0], s_s[0]};
}

// Number of +inf entries of x(vocab), in every thread; exact as a float for vocab <= 2^24.
__device__ __forceinline__ float count_pos_inf(const float *__restrict__ x, int vocab) {
  float count = 0.f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) count += x[i] == INFINITY ? 1.f : 0.f;
  return block_sum(count);
}

// The greedy pick and its logprob from a row's SoftmaxMax, by the rules at the top (the CPU sampler's): +inf entries
// share all the probability (inf_count of them: only read when m is +inf); a row of only -inf and NaN gives id 0.
__device__ __forceinline__ void argmax_result(const SoftmaxMax &st, float inf_count, int vocab, int32_t &id,
                                              float &lp) {
  id = st.id;
  if (st.m == INFINITY) lp = float(-log(double(inf_count)));
  else if (st.m == -INFINITY) id = 0, lp = float(-log(double(vocab)));
  else lp = -logf(st.s);  // l[id] - m = 0
}

// The pick of a captured decode step's row into host memory and the row's metadata one token on (StepAdvance; one
// thread of the row). The row's own position picks the host slot, so two chained steps in flight never share one.
__device__ __forceinline__ void step_advance(const vt::cuda::StepAdvance &a, int64_t row, int32_t id) {
  const int32_t p = a.positions[row] - a.moved;
  a.host_picks[int64_t(p & 1) * a.picks_stride + row] = id;
  if (!a.moved && a.slots[row] >= 0) {
    const int32_t next = p + 1, block = next / a.block_size;
    a.positions[row] = next;
    a.seq_pos0[row] = next;
    a.slots[row] = block < a.table_width ? a.tables[row * a.table_width + block] * a.block_size + next % a.block_size
                                         : -1;
  }
  __threadfence_system();  // (the host reads the pick once the step's event has completed)
}

// Grid (n), block kArgmaxThreads. vec: every row 16-byte aligned (ld % 4 == 0, logits aligned).
__device__ __forceinline__ void argmax_row(const float *__restrict__ logits, int64_t ld, int vocab, int vec,
                                           int32_t *__restrict__ out_ids, float *__restrict__ out_logprobs) {
  const int64_t row = blockIdx.x;
  const float *x = logits + row * ld;
  const SoftmaxMax st = row_softmax_max(x, vocab, vec);
  const float count = st.m == INFINITY ? count_pos_inf(x, vocab) : 0.f;  // (block-uniform)
  if (threadIdx.x == 0) {
    int32_t id;
    float lp;
    argmax_result(st, count, vocab, id, lp);
    out_ids[row] = id;
    if (out_logprobs) out_logprobs[row] = lp;
  }
}

// The same result as argmax_row (ids equal, logprob to rounding), one row split over kArgmaxParts blocks, one
// thread-block cluster (sm_90+): grid (n, kArgmaxParts), cluster (1, kArgmaxParts). One block reading the 608 KB row
// of a 151,936-token vocabulary took 16.5 us on the H200 (ncu, isolated; ~37 GB/s), 2% of the Qwen3-0.6B batch-1
// step, with every other SM idle. Block r takes the r-th run of ceil(vocab / parts) ids (rounded up to 4, so every
// run starts 16-byte aligned with the row), as row_softmax_max does the whole row, and counts its +inf entries when
// its max is +inf; block 0 merges the blocks' states in rank order through distributed shared memory (ties: the
// lowest id), so the result does not depend on timing.
constexpr int kArgmaxParts = 8;  // the portable cluster size

__device__ __forceinline__ void argmax_row_parts(const float *__restrict__ logits, int64_t ld, int vocab, int vec,
                                                 int32_t *__restrict__ out_ids, float *__restrict__ out_logprobs,
                                                 int32_t *__restrict__ also_ids, const vt::cuda::StepAdvance &adv) {
  const int64_t row = blockIdx.x;
  const unsigned rank = cluster_rank();
  const int per = ((vocab + kArgmaxParts - 1) / kArgmaxParts + 3) & ~3;
  const int c0 = min(vocab, int(rank) * per), len = min(vocab - c0, per);
  const float *x = logits + row * ld + c0;
  const SoftmaxMax st = len > 0 ? row_softmax_max(x, len, vec) : SoftmaxMax{-INFINITY, 0, 0.f};  // (block-uniform)
  const float count = st.m == INFINITY ? count_pos_inf(x, len) : 0.f;
  __shared__ float part[4];  // m, s, count of +inf, id (as float bits)
  if (threadIdx.x == 0) part[0] = st.m, part[1] = st.s, part[2] = count, part[3] = __int_as_float(c0 + st.id);
  cluster_arrive();
  cluster_wait();  // every block's part visible
  if (rank == 0 && threadIdx.x == 0) {
    SoftmaxMax a{-INFINITY, 0, 0.f};
    float inf_count = 0.f;
    for (unsigned r = 0; r < unsigned(kArgmaxParts); ++r) {
      const float bm = cluster_load(&part[0], r);
      softmax_max_merge(a, bm, __float_as_int(cluster_load(&part[3], r)), cluster_load(&part[1], r));
      inf_count += cluster_load(&part[2], r);  // 0 unless that block's max is +inf
    }
    int32_t id;
    float lp;
    argmax_result(a, inf_count, vocab, id, lp);
    out_ids[row] = id;
    if (out_logprobs) out_logprobs[row] = lp;
    if (also_ids) also_ids[row] = id;
    if (adv.positions) step_advance(adv, row, id);
  }
  cluster_arrive();
  cluster_wait();  // no block leaves while block 0 may still read its part
}

}  // namespace vtk
