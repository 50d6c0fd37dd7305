// What changes a request's logits before sampling: logit bias, then transformers' repetition penalty (over the
// prompt and the output), then OpenAI's presence and frequency penalties (over the output only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sample_rows.h"

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

// The processors of a step's sampled rows in the form the GPU applies them (Ops::apply_penalties, penalties.cuh),
// one row per add(), in CSR form (offsets have a leading 0):
//   rows:  the three penalties (1, 0, 0 for a row without processors);
//   seen:  every distinct id of tokens with its count in the output (tokens[n_prompt..]; 0: prompt only), in
//          order of first appearance: all of them when the repetition penalty is on, else only the output's
//          (the only ones presence and frequency change); none when no penalty is on;
//   bias:  logit_bias in its order (an id may repeat).
// Applying them per penalties.cuh's rules gives what apply_logits_processors gives on the host.
struct ProcessorLists {
  std::vector<PenaltyRow> rows;
  std::vector<int32_t> seen_offsets{0}, seen_ids, seen_counts;
  std::vector<int32_t> bias_offsets{0}, bias_ids;
  std::vector<float> bias_values;

  void clear();
  // Every id in tokens must be in [0, vocab) (vt_engine_submit checks it).
  void add(const LogitsProcessors &p, const std::vector<int32_t> &tokens, int32_t n_prompt, int32_t vocab);
  int32_t n_rows() const { return int32_t(rows.size()); }
  // Rows [r0, r0 + n) packed for one upload: penalty rows, seen offsets (rebased to 0), seen ids, seen counts,
  // bias offsets (rebased), bias ids, bias values, each part 16-byte aligned; at[i] receives part i's byte
  // offset. Returns the bytes; dst null: only the sizes.
  size_t pack(int32_t r0, int32_t n, uint8_t *dst, size_t (&at)[7]) const;
  size_t upload_bytes(int32_t r0, int32_t n) const {
    size_t at[7];
    return pack(r0, n, nullptr, at);
  }

 private:
  std::vector<int32_t> counts_;  // (vocab) -1 between rows; an id's output count while its row is listed
};

}  // namespace vt
