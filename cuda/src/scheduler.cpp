#include "scheduler.h"

#include <algorithm>
#include <unordered_map>

namespace vt {

namespace {

// Moves the sequences of `from` that `pick` chooses to the back of `to`; both keep their order.
template <typename From, typename Pick>
void move_if(From &from, std::vector<std::unique_ptr<Sequence>> &to, Pick pick) {
  for (auto it = from.begin(); it != from.end();) {
    if (!pick(**it)) {
      ++it;
      continue;
    }
    to.push_back(std::move(*it));
    it = from.erase(it);
  }
}

}  // namespace

void Scheduler::drop_state(Sequence &s) {
  blocks_.release(s.block_table);  // (cached ones stay cached: it may find them again when re-admitted)
  if (slots_) slots_->release(s.state_slot);
  s.n_computed = 0;
  s.prefix = PrefixChain{};
}

void Scheduler::preempt_newest() {
  std::unique_ptr<Sequence> s = std::move(running_.back());
  running_.pop_back();
  drop_state(*s);  // recomputed from its tokens (prompt + what it generated) when re-admitted
  waiting_.push_front(std::move(s));
  ++preemptions_;
}

void Scheduler::pause_held() {
  auto held = [](const Sequence &s) { return s.paused(); };
  move_if(running_, paused_, held);
  move_if(waiting_, paused_, held);
}

bool Scheduler::resumable() const {
  return std::any_of(paused_.begin(), paused_.end(), [](const auto &s) { return !s->paused(); });
}

void Scheduler::resume_allowed() {
  for (auto it = paused_.begin(); it != paused_.end();) {
    Sequence &s = **it;
    const bool has_kv = s.holds_state();
    // One that kept its KV waits here for a seat rather than give it up (its blocks stay evictable meanwhile).
    if (s.paused() || (has_kv && int32_t(running_.size()) >= limits_.max_seqs)) {
      ++it;
      continue;
    }
    if (has_kv) running_.push_back(std::move(*it));  // goes on where it stopped
    else waiting_.push_front(std::move(*it));        // its KV was taken back: recomputed, as a preempted one is
    it = paused_.erase(it);
  }
}

int32_t Scheduler::paused_blocks() const {
  // A block shared with a running sequence stays held when the paused ones let go of it: only those held by paused
  // sequences alone count (each once, however many of them share it).
  std::unordered_map<int32_t, int32_t> held;
  for (const auto &s : paused_)
    for (int32_t b : s->block_table) ++held[b];
  int32_t n = 0;
  for (const auto &[b, k] : held) n += k == blocks_.refs(b);
  return n;
}

bool Scheduler::evict_paused() {
  // Those still waiting for their consumer before those allowed to go on (they wait for a seat), and among them
  // the one that has waited the longest.
  auto holding = [](bool waits_for_consumer) {
    return [=](const std::unique_ptr<Sequence> &s) { return s->holds_state() && s->paused() == waits_for_consumer; };
  };
  auto it = std::find_if(paused_.begin(), paused_.end(), holding(true));
  if (it == paused_.end()) it = std::find_if(paused_.begin(), paused_.end(), holding(false));
  if (it == paused_.end()) return false;
  drop_state(**it);
  ++preemptions_;
  return true;
}

bool Scheduler::admit_room(Sequence &s, int64_t n_tokens) {
  if (blocks_.grow(s.block_table, n_tokens)) return true;
  const int32_t needed = blocks_.blocks_for(n_tokens) - int32_t(s.block_table.size());
  if (needed > blocks_.n_free() + paused_blocks()) return false;
  while (blocks_.n_free() < needed && evict_paused()) {
  }
  return blocks_.grow(s.block_table, n_tokens);
}

bool Scheduler::admit_slot(Sequence &s) {
  if (!slots_ || s.state_slot >= 0) return true;
  // No slot to be had: every slot held (running sequences hold at most max_seqs - 1 of them here: there is a seat,
  // so a paused one holds the rest), or every mapped one of a growing set whose device has no memory for more (then
  // the slot may be a paused sequence's, or it waits until a running one finishes). Take one back as admit_room
  // takes blocks.
  // (At most one per paused sequence: a loop that cannot end if a slot were not given back.)
  for (size_t left = paused_.size(); (s.state_slot = slots_->take()) < 0; --left)
    if (left == 0 || !evict_paused()) return false;
  return true;
}

bool Scheduler::reuse_prefix(Sequence &s) {
  if (!blocks_.caching() || !s.block_table.empty()) return false;
  // At least its last token is computed: its logits pick the next token. The block that holds it is never a shared
  // one (a sequence never writes into a block others read), so a prompt cached to its end recomputes its last block.
  int32_t limit = int32_t(s.tokens.size()) - 1;
  // Teacher forcing reports prompt token t from the logits at position t - 1: those from the next one to report on
  // must be computed (from the first prompt token, unless a preemption came after some were reported).
  if (s.prompt_logprobs && s.prompt_logprobs_done < s.n_prompt) limit = std::min(limit, s.prompt_logprobs_done - 1);
  if (limit <= 0) return false;  // (a one-token prompt, or teacher forcing from the first prompt token: nothing to look up)
  s.n_computed = blocks_.match(s.tokens.data(), limit, s.block_table, s.prefix);
  return true;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  pause_held();
  resume_allowed();
  std::vector<ScheduledChunk> plan;
  int32_t budget = limits_.max_batch_tokens;

  // Running sequences first, oldest first, so a decode is never starved by new prompts.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence *s = running_[i].get();
    const int32_t n = std::min(s->n_pending(), budget);
    if (n <= 0) { ++i; continue; }
    if (!blocks_.grow(s->block_table, int64_t(s->n_computed) + n)) {
      // Out of KV blocks: take back a paused sequence's first (it waits for its consumer anyway).
      if (paused_blocks() > 0) {
        evict_paused();
        continue;
      }
      // Else make room by sending the newest sequence back to the queue. If that is this one, it simply waits;
      // nothing already planned is touched (planned sequences are older).
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
    const bool looked_up = reuse_prefix(*s);
    const int32_t n = std::min(s->n_pending(), budget);
    if (!admit_slot(*s) || !admit_room(*s, int64_t(s->n_computed) + n)) {
      drop_state(*s);  // a waiting sequence holds no blocks and no slot; it looks again when there is room
      break;
    }
    if (looked_up) {
      ++prefix_queries_;
      prefix_query_tokens_ += int64_t(s->tokens.size());
      prefix_hit_tokens_ += s->n_computed;
    }
    plan.push_back({s, s->n_computed, n, s->n_computed + n == int32_t(s->tokens.size())});
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return plan;
}

void Scheduler::commit(const std::vector<ScheduledChunk> &plan) {
  for (const auto &c : plan) {
    Sequence &s = *c.seq;
    s.n_computed = c.pos0 + c.n_tokens;
    blocks_.publish(s.tokens.data(), s.n_computed, s.block_table, s.prefix);  // the blocks the chunk filled
  }
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
  } else if (auto kt = std::find_if(paused_.begin(), paused_.end(), match); kt != paused_.end()) {
    out = std::move(*kt);
    paused_.erase(kt);
  }
  if (out) drop_state(*out);
  return out;
}

Sequence *Scheduler::find(uint64_t id) {
  auto match = [id](const std::unique_ptr<Sequence> &s) { return s->id == id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) return it->get();
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) return it->get();
  if (auto it = std::find_if(paused_.begin(), paused_.end(), match); it != paused_.end()) return it->get();
  return nullptr;
}

std::vector<uint64_t> Scheduler::active_ids() const {
  std::vector<uint64_t> out;
  for (const auto &s : running_) out.push_back(s->id);
  for (const auto &s : waiting_) out.push_back(s->id);
  return out;
}

std::vector<uint64_t> Scheduler::ids() const {
  std::vector<uint64_t> out = active_ids();
  for (const auto &s : paused_) out.push_back(s->id);
  return out;
}

}  // namespace vt
