#include "model_runner.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vt {

ModelRunner::ModelRunner(std::unique_ptr<Decoder> model, int32_t block_size, int32_t vocab, int32_t max_tokens,
                         int32_t max_seqs)
    : model_(std::move(model)), block_size_(block_size), vocab_(vocab) {
  tokens_.reserve(max_tokens);
  positions_.reserve(max_tokens);
  slots_.reserve(max_tokens);
  logits_.resize(size_t(max_seqs) * vocab);
}

// The plan as the model takes it (into this runner's arrays): from_picks, the tokens are the previous step's picks
// (left on the device; 0 here).
ForwardBatch ModelRunner::inputs(const std::vector<ScheduledChunk> &plan, bool from_picks) {
  const int32_t bs = block_size_;
  tokens_.clear();
  positions_.clear();
  slots_.clear();
  seq_q_start_.assign(1, 0);
  seq_pos0_.clear();
  state_slots_.clear();
  logit_rows_.clear();
  size_t max_blocks = 1;
  for (const auto &c : plan) max_blocks = std::max(max_blocks, c.seq->block_table.size());
  block_tables_.assign(plan.size() * max_blocks, 0);

  for (size_t s = 0; s < plan.size(); ++s) {
    const ScheduledChunk &c = plan[s];
    const Sequence &seq = *c.seq;
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      const int32_t p = c.pos0 + j;
      tokens_.push_back(from_picks ? 0 : seq.tokens[p]);
      positions_.push_back(p);
      slots_.push_back(seq.block_table[p / bs] * bs + p % bs);
    }
    std::copy(seq.block_table.begin(), seq.block_table.end(), block_tables_.begin() + s * max_blocks);
    seq_pos0_.push_back(c.pos0);
    state_slots_.push_back(seq.state_slot);
    seq_q_start_.push_back(int32_t(tokens_.size()));
    if (c.sample) logit_rows_.push_back(int32_t(tokens_.size()) - 1);
  }
  if (logits_.size() < logit_rows_.size() * size_t(vocab_)) logits_.resize(logit_rows_.size() * size_t(vocab_));

  ForwardBatch b;
  b.n_tokens = int32_t(tokens_.size());
  b.tokens = tokens_.data();
  b.positions = positions_.data();
  b.slots = slots_.data();
  b.attn = cpu::AttentionBatch{int32_t(plan.size()), seq_q_start_.data(), seq_pos0_.data(), block_tables_.data(),
                               int32_t(max_blocks), bs};
  b.state_slots = state_slots_.data();
  b.tokens_from_picks = from_picks;
  return b;
}

void ModelRunner::run(const std::vector<ScheduledChunk> &plan) {
  model_->forward(inputs(plan, false));
  const int32_t n_rows = int32_t(logit_rows_.size());
  bool all_greedy = n_rows > 0, no_processors = n_rows > 0;
  int32_t top_n = 0;
  for (const auto &c : plan) {
    if (!c.sample) continue;
    const Sequence &s = *c.seq;
    all_greedy = all_greedy && !(s.sampling.temperature > 0.f) && s.sampling.logprobs <= 0 && !s.processors.active();
    no_processors = no_processors && !s.processors.active();
    top_n = std::max(top_n, std::min(s.sampling.logprobs, kMaxTop));
  }
  has_tokens_ = false;
  if (all_greedy) {
    tokens_out_.resize(size_t(n_rows));
    has_tokens_ = model_->greedy(logit_rows_.data(), n_rows, tokens_out_.data());
    if (has_tokens_) {
      results_.assign(size_t(n_rows), SampleResult{});
      for (int32_t i = 0; i < n_rows; ++i) results_[size_t(i)].token = tokens_out_[size_t(i)];
    }
  } else if (n_rows > 0 && model_->samples_on_device() &&
             (no_processors || (model_->processors_on_device() && device_processors(plan)))) {
    sample_on_device(plan, top_n, !no_processors);
    has_tokens_ = true;
  }
  if (!has_tokens_) model_->project(logit_rows_.data(), n_rows, logits_.data());

  prompt_lp_.assign(plan.size(), {});
  prompt_lp_start_.assign(plan.size(), 0);
  for (size_t s = 0; s < plan.size(); ++s)
    if (plan[s].seq->prompt_logprobs) teacher_force(s, plan[s], seq_q_start_[s]);
}

// A sampled row's parameters for the device, with the request's uniform draw: Rng::uniform() when temperature > 0,
// exactly as vt::sample would draw it, so a seeded request gives the same draws on either path.
static SampleRow draw_sample_row(Sequence &s) {
  SampleRow r{};
  r.temperature = s.sampling.temperature;
  r.top_k = s.sampling.top_k;
  r.top_p = s.sampling.top_p;
  r.min_p = s.sampling.min_p;
  r.u = s.sampling.temperature > 0.f ? s.rng.uniform() : 0.0;
  return r;
}

bool ModelRunner::chainable(const std::vector<ScheduledChunk> &plan) const {
  bool sampled = false;
  for (const auto &c : plan) {
    const Sequence &s = *c.seq;
    if (c.n_tokens != 1 || !c.sample || s.prompt_logprobs || s.sampling.logprobs > 0 || s.processors.active())
      return false;
    sampled = sampled || s.sampling.temperature > 0.f;
  }
  return !plan.empty() && model_->chains(int32_t(plan.size())) && (!sampled || model_->chains_sampled());
}

void ModelRunner::launch_chained(const std::vector<ScheduledChunk> &plan, bool from_picks) {
  model_->forward(inputs(plan, from_picks));
  // Sampled rows: the request's uniform draw is made now, at launch, one per step as sample_on_device makes it, so a
  // seeded request draws the same sequence chained or not (a chained step launched after the request's last token is
  // dropped with the request).
  bool sampled = false;
  sample_params_.clear();
  for (const auto &c : plan) {
    sampled = sampled || c.seq->sampling.temperature > 0.f;
    sample_params_.push_back(draw_sample_row(*c.seq));
  }
  model_->chain_begin(int32_t(plan.size()), sampled ? sample_params_.data() : nullptr);
  launched_.push_back(int32_t(plan.size()));
}

const std::vector<int32_t> &ModelRunner::collect_chained() {
  if (launched_.empty()) throw std::logic_error("ModelRunner::collect_chained: nothing launched");
  picks_.resize(size_t(launched_.front()));
  launched_.erase(launched_.begin());
  model_->chain_end(picks_.data());
  return picks_;
}

// Every sampled row on the device (Decoder::sample): the request's uniform draw is made here, exactly as
// vt::sample would make it (one Rng::uniform() when temperature > 0), so a seeded request gives the same draws
// on either path; the results are laid out as vt::sample's SampleResult (logprob and the top list only when the
// request asked for logprobs).
// The sampled rows' logits processors as the device takes them (every sampled row, in order; a row without
// processors gets none), and whether the model can apply them this step.
bool ModelRunner::device_processors(const std::vector<ScheduledChunk> &plan) {
  proc_lists_.clear();
  for (const auto &c : plan)
    if (c.sample) proc_lists_.add(c.seq->processors, c.seq->tokens, c.seq->n_prompt, vocab_);
  return model_->applies_processors(proc_lists_);
}

void ModelRunner::sample_on_device(const std::vector<ScheduledChunk> &plan, int32_t top_n, bool with_processors) {
  const size_t n = logit_rows_.size();
  sample_params_.clear();
  for (const auto &c : plan) {
    if (c.sample) sample_params_.push_back(draw_sample_row(*c.seq));
  }
  tokens_out_.resize(n);
  sampled_lps_.resize(n);
  top_ids_.resize(n * size_t(top_n));
  top_lps_.resize(n * size_t(top_n));
  model_->sample(logit_rows_.data(), int32_t(n), sample_params_.data(), top_n, tokens_out_.data(), sampled_lps_.data(),
                 top_ids_.data(), top_lps_.data(), with_processors ? &proc_lists_ : nullptr);
  results_.assign(n, SampleResult{});
  size_t i = 0;
  for (const auto &c : plan) {
    if (!c.sample) continue;
    SampleResult &r = results_[i];
    r.token = tokens_out_[i];
    const int32_t want = c.seq->sampling.logprobs;
    r.n_top = want > 0 ? std::min({want, kMaxTop, vocab_}) : 0;
    if (r.n_top > 0) {
      r.logprob = sampled_lps_[i];
      std::copy_n(top_ids_.begin() + int64_t(i) * top_n, r.n_top, r.top_ids);
      std::copy_n(top_lps_.begin() + int64_t(i) * top_n, r.n_top, r.top_logprobs);
    }
    ++i;
  }
}

// Row j of a chunk (position pos0 + j) predicts prompt token pos0 + j + 1. Those logits are projected a few
// rows at a time, so a long prompt never needs a (prompt, vocab) buffer.
void ModelRunner::teacher_force(size_t c, const ScheduledChunk &chunk, int32_t first_row) {
  constexpr int32_t kPromptBlock = 16;
  Sequence &seq = *chunk.seq;
  const int32_t lo = std::max(seq.prompt_logprobs_done, chunk.pos0 + 1);   // first target index to report
  const int32_t hi = std::min(seq.n_prompt, chunk.pos0 + chunk.n_tokens + 1);  // one past the last target
  prompt_lp_start_[c] = lo;
  if (hi <= lo) return;
  block_logits_.resize(size_t(kPromptBlock) * vocab_);
  std::vector<int32_t> rows;
  for (int32_t t0 = lo; t0 < hi; t0 += kPromptBlock) {
    const int32_t n = std::min(kPromptBlock, hi - t0);
    rows.clear();
    for (int32_t i = 0; i < n; ++i) rows.push_back(first_row + (t0 + i - 1 - chunk.pos0));
    model_->project(rows.data(), n, block_logits_.data());
    for (int32_t i = 0; i < n; ++i) {
      const float *l = block_logits_.data() + int64_t(i) * vocab_;
      float mx = l[0];
      for (int32_t v = 1; v < vocab_; ++v) mx = std::max(mx, l[v]);
      double sum = 0;
      for (int32_t v = 0; v < vocab_; ++v) sum += std::exp(double(l[v] - mx));
      prompt_lp_[c].push_back(float(double(l[seq.tokens[t0 + i]] - mx) - std::log(sum)));
    }
  }
  seq.prompt_logprobs_done = hi;
}

}  // namespace vt
