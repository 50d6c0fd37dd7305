// Per-row parameters of sampling where the logits are (a decoder's sample() and chain_begin(): the GPU sampler
// reads them as the host wrote them) and of the logits processors. Plain structs, generic (the engine and the
// model runner build them whatever the backend), shared with the CUDA kernels (backend/cuda/sample_rows.h): nvcc
// and g++ must lay them out alike, hence fixed-size fields only, the 8-byte one first.
#pragma once

#include <stdint.h>

namespace vt {

// One row of sampling (Ops::sample on the GPU): the fields of SamplingParams that pick the token, and the step's uniform draw.
struct SampleRow {
  double u;           // Rng::uniform() of the row's request, drawn only when temperature > 0 (as sample() does)
  float temperature;  // not > 0 (0, negative, NaN): greedy
  int32_t top_k;      // <= 0 or >= vocab: off
  float top_p;        // not < 1 (1, NaN): off; < 0 acts as 0 (the top token alone)
  float min_p;        // not > 0: off; > 1 acts as 1
};
static_assert(sizeof(SampleRow) == 24, "SampleRow is read by the kernels as 24 bytes");

// One row of the logits processors (Ops::apply_penalties on the GPU): LogitsProcessors' three penalties (1, 0, 0: none).
struct PenaltyRow {
  float repetition;
  float presence;
  float frequency;
};
static_assert(sizeof(PenaltyRow) == 12, "PenaltyRow is read by the kernels as 12 bytes");

}  // namespace vt
