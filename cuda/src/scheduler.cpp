#include "scheduler.h"

#include <algorithm>

namespace vt {

void Scheduler::preempt_newest() {
  std::unique_ptr<Sequence> s = std::move(running_.back());
  running_.pop_back();
  blocks_.release(s->block_table);
  s->n_computed = 0;  // recomputed from its tokens (prompt + what it generated) when re-admitted
  waiting_.push_front(std::move(s));
  ++preemptions_;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> plan;
  int32_t budget = limits_.max_batch_tokens;

  // Running sequences first, oldest first, so a decode is never starved by new prompts.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence *s = running_[i].get();
    const int32_t n = std::min(s->n_pending(), budget);
    if (n <= 0) { ++i; continue; }
    if (!blocks_.grow(s->block_table, int64_t(s->n_computed) + n)) {
      // Out of KV blocks: make room by sending the newest sequence back to the queue. If that is this one,
      // it simply waits; nothing already planned is touched (planned sequences are older).
      const bool self = i + 1 == running_.size();
      preempt_newest();
      if (self) break;
      continue;
    }
    plan.push_back({s, s->n_computed, n, s->n_computed + n == int32_t(s->tokens.size())});
    budget -= n;
    ++i;
  }

  // Then admit waiting sequences in arrival order while there is budget, a seat and KV room.
  while (!waiting_.empty() && budget > 0 && int32_t(running_.size()) < limits_.max_seqs) {
    Sequence *s = waiting_.front().get();
    const int32_t n = std::min(s->n_pending(), budget);
    if (!blocks_.grow(s->block_table, int64_t(s->n_computed) + n)) break;
    plan.push_back({s, s->n_computed, n, s->n_computed + n == int32_t(s->tokens.size())});
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return plan;
}

void Scheduler::commit(const std::vector<ScheduledChunk> &plan) {
  for (const auto &c : plan) c.seq->n_computed = c.pos0 + c.n_tokens;
}

std::unique_ptr<Sequence> Scheduler::remove(uint64_t id) {
  auto match = [id](const std::unique_ptr<Sequence> &s) { return s->id == id; };
  std::unique_ptr<Sequence> out;
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    out = std::move(*it);
    running_.erase(it);
  } else if (auto jt = std::find_if(waiting_.begin(), waiting_.end(), match); jt != waiting_.end()) {
    out = std::move(*jt);
    waiting_.erase(jt);
  }
  if (out) blocks_.release(out->block_table);
  return out;
}

std::vector<uint64_t> Scheduler::ids() const {
  std::vector<uint64_t> out;
  for (const auto &s : running_) out.push_back(s->id);
  for (const auto &s : waiting_) out.push_back(s->id);
  return out;
}

}  // namespace vt
