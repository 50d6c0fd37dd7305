// Continuous batching with chunked prefill. Each step it picks, within a token budget and a seat limit,
// what every running sequence runs next (one decode token, or the next chunk of its prompt) and admits
// waiting sequences in arrival order. When the KV pool runs dry it preempts the newest running sequence:
// its blocks go back to the pool and it waits again, to be recomputed from its tokens (nothing is lost).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "block_manager.h"
#include "sequence.h"

namespace vt {

struct ScheduledChunk {
  Sequence *seq;
  int32_t pos0;      // position of the chunk's first token (= seq->n_computed)
  int32_t n_tokens;
  bool sample;       // the chunk reaches the end of seq->tokens, so its last row's logits are sampled
};

struct SchedulerLimits {
  int32_t max_seqs;
  int32_t max_batch_tokens;
};

class Scheduler {
 public:
  Scheduler(SchedulerLimits limits, BlockManager &blocks) : limits_(limits), blocks_(blocks) {}

  void add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

  // Plans one step. Allocates the blocks the chunks need. Empty when there is nothing to run.
  std::vector<ScheduledChunk> schedule();

  // Applies a finished step: advances n_computed of every chunk.
  void commit(const std::vector<ScheduledChunk> &plan);

  // Removes a sequence (finished or aborted) wherever it is and frees its blocks.
  std::unique_ptr<Sequence> remove(uint64_t id);

  bool idle() const { return waiting_.empty() && running_.empty(); }
  int32_t n_waiting() const { return int32_t(waiting_.size()); }
  int32_t n_running() const { return int32_t(running_.size()); }
  int64_t preemptions() const { return preemptions_; }
  std::vector<uint64_t> ids() const;

 private:
  void preempt_newest();

  SchedulerLimits limits_;
  BlockManager &blocks_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // arrival order: index 0 is the oldest
  int64_t preemptions_ = 0;
};

}  // namespace vt
