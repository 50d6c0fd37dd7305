// What changes a request's logits before sampling: logit bias, then transformers' repetition penalty (over the
// prompt and the output), then OpenAI's presence and frequency penalties (over the output only).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace vt {

struct LogitsProcessors {
  float repetition_penalty = 1.f;
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool active() const {
    return repetition_penalty != 1.f || presence_penalty != 0.f || frequency_penalty != 0.f || !logit_bias.empty();
  }
};

// In place on logits(vocab). tokens = prompt + output; output starts at n_prompt. `counts` is scratch (vocab).
void apply_logits_processors(const LogitsProcessors &p, const std::vector<int32_t> &tokens, int32_t n_prompt, float *logits,
                             int32_t vocab, std::vector<int32_t> &counts);

}  // namespace vt
