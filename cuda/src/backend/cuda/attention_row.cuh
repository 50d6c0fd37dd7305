// What the CUDA-core attention kernels (attention.cuh's simple kernel, attention_split.cuh's CUDA-core warp) do
// alike for one query row: find the row's sequence in the ragged batch, and fold a step of keys into a warp's
// online softmax.
#pragma once

#include "common.cuh"

namespace vtk {

// The sequence of query row `row`: the last s with seq_q_start[s] <= row (seq_q_start ascending, n_seqs >= 1).
__device__ __forceinline__ int row_sequence(int row, const int32_t *__restrict__ seq_q_start, int n_seqs) {
  int lo = 0, hi = n_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (seq_q_start[mid] <= row) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// One step of a warp's online softmax (flash-attention style) over K keys: the running max m, sum l and
// unnormalised acc (VPL values per lane) are rescaled to the new max, then the step's weights are added. sc: the
// step's scores, -inf for masked keys (the first key is always valid, so the new max is finite; on the first
// step m = -inf and the rescale is by 0); vf: the keys' values. LOG2: the scores are in the log2 domain (exp2),
// else natural (exp).
template <bool LOG2, int K, int VPL>
__device__ __forceinline__ void online_softmax_step(const float (&sc)[K], const float (&vf)[K][VPL], float &m, float &l,
                                                    float (&acc)[VPL]) {
  float mx = sc[0];
#pragma unroll
  for (int j = 1; j < K; ++j) mx = fmaxf(mx, sc[j]);
  const float m_new = fmaxf(m, mx);
  const float alpha = LOG2 ? exp2f(m - m_new) : expf(m - m_new);
  l *= alpha;
#pragma unroll
  for (int i = 0; i < VPL; ++i) acc[i] *= alpha;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const float pj = LOG2 ? exp2f(sc[j] - m_new) : expf(sc[j] - m_new);  // 0 for masked keys
    l += pj;
#pragma unroll
    for (int i = 0; i < VPL; ++i) acc[i] = fmaf(pj, vf[j][i], acc[i]);
  }
  m = m_new;
}

}  // namespace vtk
