#include "logits_processors.h"

#include <algorithm>

namespace vt {

void apply_logits_processors(const LogitsProcessors &p, const std::vector<int32_t> &tokens, int32_t n_prompt, float *logits,
                             int32_t vocab, std::vector<int32_t> &counts) {
  for (const auto &[id, bias] : p.logit_bias) logits[id] += bias;

  if (p.repetition_penalty != 1.f) {
    // Each distinct token seen once, as transformers gathers then scatters: positive logits shrink, negative grow.
    counts.assign(vocab, 0);
    for (int32_t t : tokens) {
      if (counts[t]) continue;
      counts[t] = 1;
      float &l = logits[t];
      l = l < 0 ? l * p.repetition_penalty : l / p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.f || p.frequency_penalty != 0.f) {
    counts.assign(vocab, 0);
    for (size_t i = size_t(n_prompt); i < tokens.size(); ++i) ++counts[tokens[i]];
    for (size_t i = size_t(n_prompt); i < tokens.size(); ++i) {
      const int32_t t = tokens[i];
      if (counts[t] <= 0) continue;  // already applied for this id
      logits[t] -= p.presence_penalty + p.frequency_penalty * float(counts[t]);
      counts[t] = 0;
    }
  }
}

}  // namespace vt
