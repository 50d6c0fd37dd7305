#include "logits_processors.h"

#include <algorithm>
#include <cstring>

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

void ProcessorLists::clear() {
  rows.clear();
  seen_offsets.assign(1, 0);
  seen_ids.clear();
  seen_counts.clear();
  bias_offsets.assign(1, 0);
  bias_ids.clear();
  bias_values.clear();
}

void ProcessorLists::add(const LogitsProcessors &p, const std::vector<int32_t> &tokens, int32_t n_prompt,
                         int32_t vocab) {
  rows.push_back({p.repetition_penalty, p.presence_penalty, p.frequency_penalty});
  const bool repetition = p.repetition_penalty != 1.f;
  const bool additive = p.presence_penalty != 0.f || p.frequency_penalty != 0.f;
  if (repetition || additive) {
    // counts[id]: -1 not listed yet, else its output count so far; reset for the listed ids afterwards, so the
    // scratch stays -1 between rows (O(tokens) per row, not O(vocab)).
    std::vector<int32_t> &counts = counts_;
    if (counts.size() != size_t(vocab)) counts.assign(size_t(vocab), -1);
    const size_t first = seen_ids.size();
    for (size_t i = repetition ? 0 : size_t(n_prompt); i < tokens.size(); ++i) {
      int32_t &c = counts[size_t(tokens[i])];
      if (c < 0) seen_ids.push_back(tokens[i]), c = 0;
      if (i >= size_t(n_prompt)) ++c;
    }
    for (size_t j = first; j < seen_ids.size(); ++j) {
      seen_counts.push_back(counts[size_t(seen_ids[j])]);
      counts[size_t(seen_ids[j])] = -1;
    }
  }
  seen_offsets.push_back(int32_t(seen_ids.size()));
  for (const auto &[id, bias] : p.logit_bias) bias_ids.push_back(id), bias_values.push_back(bias);
  bias_offsets.push_back(int32_t(bias_ids.size()));
}

size_t ProcessorLists::pack(int32_t r0, int32_t n, uint8_t *dst, size_t (&at)[7]) const {
  size_t off = 0;
  auto put = [&](int part, const void *src, size_t bytes) {
    at[part] = off;
    if (dst && bytes) std::memcpy(dst + off, src, bytes);
    off += (bytes + 15) & ~size_t(15);
  };
  auto rebased = [&](const std::vector<int32_t> &o) {
    std::vector<int32_t> out(size_t(n) + 1);
    for (int32_t i = 0; i <= n; ++i) out[size_t(i)] = o[size_t(r0 + i)] - o[size_t(r0)];
    return out;
  };
  const std::vector<int32_t> so = dst ? rebased(seen_offsets) : std::vector<int32_t>(size_t(n) + 1);
  const std::vector<int32_t> bo = dst ? rebased(bias_offsets) : std::vector<int32_t>(size_t(n) + 1);
  const size_t s0 = size_t(seen_offsets[size_t(r0)]), ns = size_t(seen_offsets[size_t(r0 + n)]) - s0;
  const size_t b0 = size_t(bias_offsets[size_t(r0)]), nb = size_t(bias_offsets[size_t(r0 + n)]) - b0;
  put(0, rows.data() + r0, size_t(n) * sizeof(PenaltyRow));
  put(1, so.data(), so.size() * 4);
  put(2, seen_ids.data() + s0, ns * 4);
  put(3, seen_counts.data() + s0, ns * 4);
  put(4, bo.data(), bo.size() * 4);
  put(5, bias_ids.data() + b0, nb * 4);
  put(6, bias_values.data() + b0, nb * 4);
  return off;
}

}  // namespace vt
