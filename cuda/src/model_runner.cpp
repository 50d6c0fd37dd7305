#include "model_runner.h"

#include <algorithm>

namespace vt {

ModelRunner::ModelRunner(std::unique_ptr<DenseDecoder> model, KvCache &kv, int32_t vocab, int32_t max_tokens,
                         int32_t max_seqs)
    : model_(std::move(model)), kv_(kv), vocab_(vocab) {
  tokens_.reserve(max_tokens);
  positions_.reserve(max_tokens);
  slots_.reserve(max_tokens);
  logits_.resize(size_t(max_seqs) * vocab);
}

void ModelRunner::run(const std::vector<ScheduledChunk> &plan) {
  const int32_t bs = kv_.block_size();
  tokens_.clear();
  positions_.clear();
  slots_.clear();
  seq_q_start_.assign(1, 0);
  seq_pos0_.clear();
  logit_rows_.clear();
  size_t max_blocks = 1;
  for (const auto &c : plan) max_blocks = std::max(max_blocks, c.seq->block_table.size());
  block_tables_.assign(plan.size() * max_blocks, 0);

  for (size_t s = 0; s < plan.size(); ++s) {
    const ScheduledChunk &c = plan[s];
    const Sequence &seq = *c.seq;
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      const int32_t p = c.pos0 + j;
      tokens_.push_back(seq.tokens[p]);
      positions_.push_back(p);
      slots_.push_back(seq.block_table[p / bs] * bs + p % bs);
    }
    std::copy(seq.block_table.begin(), seq.block_table.end(), block_tables_.begin() + s * max_blocks);
    seq_pos0_.push_back(c.pos0);
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
  b.n_logits = int32_t(logit_rows_.size());
  b.logit_rows = logit_rows_.data();
  model_->forward(b, kv_, logits_.data());
}

}  // namespace vt
