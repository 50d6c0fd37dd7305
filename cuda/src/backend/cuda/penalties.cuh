// The logits processors on the GPU, in place, bitwise what logits_processors.cpp computes on the host:
//   apply_penalties: logits(n, vocab) fp32, rows ld elements apart; per row a PenaltyRow and two lists in CSR
//   form (offsets (n + 1) into the arrays):
//     bias (ids, values): logit_bias in its order; an id listed twice gets both, in list order;
//     seen (ids, counts): every distinct id of the request's prompt + output, once, with its count in the
//       output (0: prompt only): repetition applies to all of them, presence and frequency to count > 0.
//   Order per token, as on the host: its biases, then repetition (a negative logit times the penalty, any
//   other divided by it), then l - (presence + frequency * float(count)). Every operation is a single
//   correctly rounded one (__f*_rn: never contracted into an FMA), as the host's x86-64 build computes them.
//   Ids outside [0, vocab) are skipped (the host validates them before).
// One block per row; the bias entries of one id are applied by the thread of its first entry, so repeated ids
// keep their order without atomics, and the seen list (distinct ids) is applied one entry per thread after a
// barrier, so it sees the biased values.
#pragma once

#include "common.cuh"
#include "sample_rows.h"

namespace vtk {

constexpr int kPenaltyThreads = 256;

// Grid (n), block kPenaltyThreads. Any of rows, the seen lists and the bias lists may be null (none).
__device__ __forceinline__ void penalties_row(float *__restrict__ logits, int64_t ld, int vocab,
                                              const vt::cuda::PenaltyRow *__restrict__ rows,
                                              const int32_t *__restrict__ seen_offsets,
                                              const int32_t *__restrict__ seen_ids,
                                              const int32_t *__restrict__ seen_counts,
                                              const int32_t *__restrict__ bias_offsets,
                                              const int32_t *__restrict__ bias_ids,
                                              const float *__restrict__ bias_values) {
  const int64_t row = blockIdx.x;
  float *x = logits + row * ld;
  if (bias_offsets) {
    const int b0 = bias_offsets[row], b1 = bias_offsets[row + 1];
    for (int j = b0 + int(threadIdx.x); j < b1; j += blockDim.x) {
      const int32_t id = bias_ids[j];
      if (id < 0 || id >= vocab) continue;
      bool first = true;
      for (int i = b0; i < j && first; ++i) first = bias_ids[i] != id;
      if (!first) continue;
      float v = x[id];
      for (int i = j; i < b1; ++i)
        if (bias_ids[i] == id) v = __fadd_rn(v, bias_values[i]);
      x[id] = v;
    }
    __syncthreads();  // the block's global writes are visible to its threads after the barrier
  }
  if (!rows || !seen_offsets) return;
  const vt::cuda::PenaltyRow p = rows[row];
  const bool repetition = p.repetition != 1.f, additive = p.presence != 0.f || p.frequency != 0.f;
  if (!repetition && !additive) return;
  const int s0 = seen_offsets[row], s1 = seen_offsets[row + 1];
  for (int j = s0 + int(threadIdx.x); j < s1; j += blockDim.x) {
    const int32_t id = seen_ids[j];
    if (id < 0 || id >= vocab) continue;
    float v = x[id];
    if (repetition) v = v < 0.f ? __fmul_rn(v, p.repetition) : __fdiv_rn(v, p.repetition);
    const int32_t count = seen_counts[j];
    if (additive && count > 0) v = __fsub_rn(v, __fadd_rn(p.presence, __fmul_rn(p.frequency, __int2float_rn(count))));
    x[id] = v;
  }
}

}  // namespace vtk
