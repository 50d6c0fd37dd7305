// Token sampling on the host: greedy, temperature, top-k, top-p, min-p, and top-N logprobs. One call per
// request per step on that request's logits row. Each request owns its Rng, so a seeded request draws the
// same numbers whatever else shares its batch.
#pragma once

#include <cstdint>
#include <vector>

#include "host_pages.h"

namespace vt {

// xoshiro256** seeded through splitmix64: fast, small state, good statistics.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits
 private:
  uint64_t s_[4];
};

struct SamplingParams {
  float temperature = 0.f;  // 0 = greedy (argmax; ties go to the lowest id)
  int32_t top_k = 0;        // 0 = off
  float top_p = 1.f;        // 1 = off
  float min_p = 0.f;        // 0 = off
  int32_t logprobs = 0;     // 0 = none; else the sampled token's logprob and this many top (<= 20)
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.f;  // log_softmax of the raw logits (before temperature and truncation), when asked
  int32_t n_top = 0;
  int32_t top_ids[20];
  float top_logprobs[20];  // same raw log_softmax, descending
};

// Scratch space reused across calls so the hot path does not allocate.
// Vocabulary-sized, held by the engine for its life: in pages of their own (host_pages.h says why).
struct SamplerScratch {
  PageVector<float> probs;
  PageVector<int32_t> idx;
};

// logits(vocab) fp32 are read, not modified. Order of the filters, as in transformers' generate():
// temperature, then top-k, then top-p, then min-p, then one uniform draw from the renormalised rest.
SampleResult sample(const float *logits, int32_t vocab, const SamplingParams &p, Rng &rng, SamplerScratch &scratch);

}  // namespace vt
