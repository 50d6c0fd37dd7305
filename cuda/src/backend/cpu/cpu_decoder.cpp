#include "backend/cpu/cpu_decoder.h"

#include <stdexcept>

#include "sampling.h"

namespace vt {

CpuDecoder::CpuDecoder(const ModelConfig &config, Weights weights, cpu::ThreadPool &pool, KvCache &kv,
                       int32_t max_tokens, const CpuTuning &tuning, decltype(ModelEntry::make) make)
    : c_(config),
      w_(std::move(weights)),
      max_tokens_(max_tokens),
      ops_(c_, pool, kv, max_tokens),
      model_((make ? make : model_entry(c_).make)(c_, w_, ops_)),
      overlap_(tuning.overlap) {}

void CpuDecoder::forward(const ForwardBatch &b) {
  const int32_t *tokens = b.tokens;
  if (b.tokens_from_picks) {  // the last begun read's picks (chains)
    if (begun_.empty() || int32_t(begun_.back().size()) < b.n_tokens)
      throw std::logic_error("CpuDecoder::forward: picks as tokens without the step before");
    tokens = begun_.back().data();
  }
  ops_.begin_step(b, tokens);
  model_->forward(ops_);
}

void CpuDecoder::project(const int32_t *rows, int32_t n, float *logits) {
  ops_.logits(model_->output(), rows, n, model_->head(), logits);
}

void CpuDecoder::chain_begin(int32_t n, const SampleRow *params) {
  if (begun_.size() >= 2 || n < 1 || n > max_tokens_ || params)
    throw std::logic_error("CpuDecoder::chain_begin: a third read, or sampled rows");
  const int64_t V = w_.lm_head.rows;
  logits_.resize(size_t(n) * size_t(V));
  std::vector<int32_t> rows(static_cast<size_t>(n)), picks(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) rows[size_t(i)] = i;
  project(rows.data(), n, logits_.data());
  SamplingParams greedy;  // temperature 0, no logprobs: the argmax, ties to the lowest id
  Rng rng;
  SamplerScratch scratch;
  for (int32_t i = 0; i < n; ++i)
    picks[size_t(i)] = vt::sample(logits_.data() + int64_t(i) * V, int32_t(V), greedy, rng, scratch).token;
  begun_.push_back(std::move(picks));
}

void CpuDecoder::chain_end(int32_t *ids) {
  if (begun_.empty()) throw std::logic_error("CpuDecoder::chain_end: no read begun");
  std::copy(begun_.front().begin(), begun_.front().end(), ids);
  begun_.erase(begun_.begin());
}

}  // namespace vt
