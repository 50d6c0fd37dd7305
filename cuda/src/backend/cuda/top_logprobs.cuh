// Top-N logprobs on the GPU, the host sampler's top list (sampling.cpp's top_list, with its rules for -inf,
// NaN and +inf rows), on the sampler's histogram and gather (sampler.cuh):
//   top_logprobs: logits(n, vocab) fp32, rows ld apart → out_ids(n, top_n) int32 and out_logprobs(n, top_n)
//   fp32: the row's min(top_n, vocab) largest values by value descending, ties to the lower id, NaN as -inf,
//   and their log-softmax of the raw logits. Entries past min(top_n, vocab) are not written.
// A rank query on the histogram at temperature 1: the bins up to the top_n-th token's are gathered and sorted;
// a bin too full for that is narrowed to the top_n-th value (descend), the larger values gathered, and the
// ties at it taken in id order.
#pragma once

#include "sampler.cuh"

namespace vtk {

// The first m (<= kMaxTopN) ids, ascending, whose sampler value `take` accepts, into s.first_ids, a block of
// ids at a time until m are found; returns how many (less than m when the row has fewer).
template <class Take>
__device__ __forceinline__ int first_ids(SamplerShared &s, const RowView &r, int m, Take take) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int found = 0;
  for (int base = 0; base < r.vocab && found < m; base += kSampleThreads) {
    const int i = base + tid;
    const bool hit = i < r.vocab && take(sampler_value(r.x[i], r.inf_mode));
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) s.warp_count[warp] = __popc(mask);
    __syncthreads();
    int before = found, total = 0;
    for (int w = 0; w < kSampleWarps; ++w) before += w < warp ? s.warp_count[w] : 0, total += s.warp_count[w];
    const int pos = before + __popc(mask & ((1u << lane) - 1u));
    if (hit && pos < m) s.first_ids[pos] = i;
    found += total;
    __syncthreads();  // warp_count is rewritten by the next block of ids
  }
  return min(found, m);
}

// Grid (n), block kSampleThreads; 1 <= top_n <= kMaxTopN.
__device__ __forceinline__ void top_logprobs_row(const float *__restrict__ logits, int64_t ld, int vocab, int vec,
                                                 int top_n, int32_t *__restrict__ out_ids,
                                                 float *__restrict__ out_logprobs) {
  __shared__ SamplerShared s;
  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x;
  const float *x = logits + row * ld;
  int32_t *ids = out_ids + row * top_n;
  float *lps = out_logprobs + row * top_n;
  const int n_top = min(top_n, vocab);
  const SoftmaxMax st = sampler_first_pass(x, vocab, vec);
  if (st.m == -INFINITY) {  // only -inf and NaN: all tie, so the first ids, each 1 / vocab
    if (tid < n_top) ids[tid] = tid, lps[tid] = float(-log(double(vocab)));
    return;
  }
  const bool inf_mode = st.m == INFINITY;  // the +inf entries share all the probability
  const double log_z = inf_mode ? log(double(count_pos_inf(x, vocab))) : double(st.m) + log(double(st.s));
  const RowView r{x, vocab, vec, inf_mode, inf_mode ? 0.f : st.m, 1.f, 0.f, 0u};
  build_histogram(s, r);
  const int b = __syncthreads_count(s.cnt[tid] < uint32_t(n_top));  // the n_top-th finite token's bin
  int n_sorted = 0, n_fill = 0;  // s.cand[0, n_sorted) then s.first_ids[0, n_fill)
  bool fill_finite = true;       // the fill: ties at the n_top-th value, or (false) -inf and NaN in id order
  if (b < kSampleBins && s.cnt[b] <= uint32_t(kSampleCap)) {
    n_sorted = min(gather_sorted(s, r, Select{0, b, 0u, ~0u, false}), n_top);
  } else if (b < kSampleBins) {
    uint32_t kth;
    descend(s, r, b, true, u64(n_top) - (b ? s.cnt[b - 1] : 0), 0, 0, &kth);
    n_sorted = gather_sorted(s, r, Select{0, kTailBin, kth + 1, ~0u, false});  // fewer than n_top
    n_fill = first_ids(s, r, n_top - n_sorted, [&](float v) { return finite_value(v) && value_key(v) == kth; });
  } else {  // fewer finite values than n_top
    n_sorted = gather_sorted(s, r, Select{0, kTailBin, 0u, ~0u, false});
    n_fill = first_ids(s, r, n_top - n_sorted, [](float v) { return !finite_value(v); });
    fill_finite = false;
  }
  if (tid < n_sorted + n_fill) {
    const int id = tid < n_sorted ? cand_id(s.cand[tid]) : s.first_ids[tid - n_sorted];
    const bool finite = tid < n_sorted || fill_finite;
    ids[tid] = id;
    lps[tid] = !finite ? -INFINITY : inf_mode ? float(-log_z) : float(double(x[id]) - log_z);
  }
}

}  // namespace vtk
