#include "backend/cpu/cpu_decoder.h"

#include <stdexcept>

namespace vt {

CpuDecoder::CpuDecoder(const ModelConfig &config, Weights weights, cpu::ThreadPool &pool, KvCache &kv,
                       int32_t max_tokens, decltype(ModelEntry::make) make)
    : c_(config),
      w_(std::move(weights)),
      max_tokens_(max_tokens),
      ops_(c_, pool, kv, max_tokens),
      model_((make ? make : model_entry(c_).make)(c_, w_, ops_)) {}

void CpuDecoder::forward(const ForwardBatch &b) {
  if (b.tokens_from_picks) throw std::logic_error("CpuDecoder::forward: the CPU decoder does not chain steps");
  ops_.begin_step(b, b.tokens);
  model_->forward(ops_);
}

void CpuDecoder::project(const int32_t *rows, int32_t n, float *logits) {
  ops_.logits(model_->output(), rows, n, model_->head(), logits);
}

}  // namespace vt
