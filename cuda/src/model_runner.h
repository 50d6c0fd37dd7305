// Turns a scheduled step into the model's flat inputs (token ids, positions, KV slots, block tables, which
// rows need logits), runs the forward pass, and leaves one logits row per sampled chunk.
#pragma once

#include <memory>
#include <vector>

#include "host_pages.h"
#include "models/decoder.h"
#include "sampling.h"
#include "scheduler.h"

namespace vt {

class ModelRunner {
 public:
  ModelRunner(std::unique_ptr<Decoder> model, int32_t block_size, int32_t vocab, int32_t max_tokens, int32_t max_seqs);

  // Runs the plan; afterwards logits(i) is the row of the i-th chunk with sample == true, in plan order, and
  // prompt_logprobs(c) holds chunk c's teacher-forced logprobs (for sequences that asked), starting at prompt
  // index prompt_logprobs_start(c).
  void run(const std::vector<ScheduledChunk> &plan);
  float *logits(int32_t i) { return logits_.data() + int64_t(i) * vocab_; }
  // When the model can pick the step's tokens where its logits are (the GPU), the logits stay there:
  // has_tokens() is true, result(i) is the i-th sampled chunk's vt::sample result and logits(i) must not be
  // read. That is the case when every sampled sequence is plain greedy (temperature 0, no logprobs, no logits
  // processors: the argmax the decode graph computes), or when the model samples on the device (Decoder::sample;
  // the request's Rng draw is made here) and either no sampled sequence has logits processors or the model
  // applies them there too (Decoder::applies_processors).
  bool has_tokens() const { return has_tokens_; }
  // The overlapped decode (Engine::step, Decoder::chains). chainable(plan): every chunk is one decode token,
  // sampled, of a sequence without logprobs, prompt logprobs or logits processors, greedy (or sampled, where the
  // model chains sampled rows: Decoder::chains_sampled), and the model chains a step of that many rows.
  // launch_chained(plan, from_picks): runs the plan's forward (its tokens the previous launch's picks, where the model
  // keeps them, when from_picks), picks its tokens (the sampled rows' draws made here) and starts reading them;
  // collect_chained() waits for the oldest launched plan's picks, one per chunk in plan order (valid until the next
  // call). At most two launched and not collected.
  bool chainable(const std::vector<ScheduledChunk> &plan) const;
  void launch_chained(const std::vector<ScheduledChunk> &plan, bool from_picks);
  const std::vector<int32_t> &collect_chained();
  int32_t launched() const { return int32_t(launched_.size()); }
  const SampleResult &result(int32_t i) const { return results_[size_t(i)]; }
  const std::vector<float> &prompt_logprobs(size_t c) const { return prompt_lp_[c]; }
  int32_t prompt_logprobs_start(size_t c) const { return prompt_lp_start_[c]; }

 private:
  std::unique_ptr<Decoder> model_;
  int32_t block_size_;
  int32_t vocab_;
  std::vector<int32_t> tokens_, positions_, slots_;   // (T)
  std::vector<int32_t> seq_q_start_, seq_pos0_;       // (n_seqs + 1), (n_seqs)
  std::vector<int32_t> state_slots_;                  // (n_seqs)
  std::vector<int32_t> block_tables_;                 // (n_seqs, max_blocks)
  std::vector<int32_t> logit_rows_;                   // (n_sampled)
  PageVector<float> logits_;                          // (n_sampled, vocab), in pages of its own (host_pages.h)
  std::vector<int32_t> tokens_out_;                   // (n_sampled) tokens picked on the device
  std::vector<float> sampled_lps_;                    // (n_sampled) their logprobs
  std::vector<int32_t> top_ids_;                      // (n_sampled, top_n)
  std::vector<float> top_lps_;                        // (n_sampled, top_n)
  std::vector<SampleRow> sample_params_;        // (n_sampled)
  std::vector<SampleResult> results_;                 // (n_sampled), when has_tokens_
  bool has_tokens_ = false;
  std::vector<int32_t> launched_;                     // rows of each launched, uncollected plan, oldest first
  std::vector<int32_t> picks_;                        // collect_chained()'s
  ForwardBatch inputs(const std::vector<ScheduledChunk> &plan, bool from_picks);
  static constexpr int32_t kMaxTop = 20;              // SampleResult's top list
  void sample_on_device(const std::vector<ScheduledChunk> &plan, int32_t top_n, bool with_processors);
  bool device_processors(const std::vector<ScheduledChunk> &plan);
  ProcessorLists proc_lists_;                         // the step's, when some sampled row has processors
  std::vector<std::vector<float>> prompt_lp_;         // per chunk
  std::vector<int32_t> prompt_lp_start_;              // per chunk
  PageVector<float> block_logits_;                    // (kPromptBlock, vocab) scratch for teacher forcing
  void teacher_force(size_t c, const ScheduledChunk &chunk, int32_t first_row);
};

}  // namespace vt
