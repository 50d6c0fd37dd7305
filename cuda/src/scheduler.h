// Continuous batching with chunked prefill. Each step it picks, within a token budget and a seat limit,
// what every running sequence runs next (one decode token, or the next chunk of its prompt) and admits
// waiting sequences in arrival order. When the KV pool runs dry it preempts the newest running sequence:
// its blocks go back to the pool and it waits again, to be recomputed from its tokens (nothing is lost).
//
// Backpressure: a sequence that has generated every token its consumer allowed (Sequence::paused) leaves the
// batch for the paused list. It gives up its seat but keeps its KV blocks, so it goes on where it stopped once
// its consumer allows more. A paused sequence's blocks are the first taken back when the pool runs dry (for a
// running sequence or to admit a waiting one), before any running sequence is preempted; it is then recomputed
// when it goes on.
//
// State slots (StateSlots; models whose layers keep a fixed-size state per sequence): a sequence takes one when it is
// admitted and holds it as it holds its blocks; paused, it keeps both, and gives both back when taken back. Slots
// that grow with demand may give none when the device has no memory for more: the sequence waits, as for blocks.
//
// Prefix caching (BlockManager): a sequence admitted from the queue (new, preempted or evicted while paused) first
// takes the longest cached prefix of its tokens in whole blocks as its KV and computes only the rest; as its chunks
// are committed, the blocks they fill are published for later sequences. Blocks it lets go of (finished, preempted,
// evicted while paused) stay cached until the pool needs them.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "block_manager.h"
#include "sequence.h"
#include "state_slots.h"

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
  // slots: the model's state slots (models/state_layout.h), or null when its layers keep nothing but K/V.
  Scheduler(SchedulerLimits limits, BlockManager &blocks, StateSlots *slots = nullptr)
      : limits_(limits), blocks_(blocks), slots_(slots) {}

  void add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

  // Plans one step. Allocates the blocks the chunks need. Empty when there is nothing to run.
  std::vector<ScheduledChunk> schedule();

  // Applies a finished step: advances n_computed of every chunk.
  void commit(const std::vector<ScheduledChunk> &plan);

  // Removes a sequence (finished or aborted) wherever it is and frees its blocks.
  std::unique_ptr<Sequence> remove(uint64_t id);

  // The sequence, wherever it is (waiting, running or paused); null when unknown.
  Sequence *find(uint64_t id);

  // Nothing to schedule: no waiting or running sequence and no paused one allowed to go on (paused ones that wait
  // for their consumer leave the step thread asleep).
  bool idle() const { return waiting_.empty() && running_.empty() && !resumable(); }
  // A sequence outside the batch is ready to join it: one waits, or a paused one was allowed to go on.
  bool wants_in() const { return !waiting_.empty() || resumable(); }
  int32_t n_waiting() const { return int32_t(waiting_.size()); }
  int32_t n_running() const { return int32_t(running_.size()); }
  int32_t n_paused() const { return int32_t(paused_.size()); }
  int64_t preemptions() const { return preemptions_; }
  // Prefix cache: admissions that looked their tokens up, the tokens those admissions had, and of them the tokens
  // found cached (not computed).
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  std::vector<uint64_t> ids() const;           // every sequence, paused ones included
  std::vector<uint64_t> active_ids() const;    // waiting and running ones

 private:
  void preempt_newest();
  void pause_held();      // running and waiting sequences that have generated all they were allowed → paused_
  void resume_allowed();  // paused sequences allowed to go on → running_ (with their blocks) or waiting_ (without)
  // Extends a waiting sequence's block table to n_tokens positions, taking back paused sequences' blocks when the
  // pool is short and theirs are enough (else it takes none: they keep their KV, and the sequence waits).
  bool admit_room(Sequence &s, int64_t n_tokens);
  bool evict_paused();    // lets go of one paused sequence's blocks (it is recomputed when it goes on); false: none
  int32_t paused_blocks() const;  // blocks that letting go of every paused sequence's would free
  void drop_state(Sequence &s);   // lets go of its blocks and its slot: it is computed again from its tokens
  // A waiting sequence's state slot (none needed without slots), taking one back from a paused sequence when every
  // slot is held; false when none can be had (it waits).
  bool admit_slot(Sequence &s);
  // A waiting sequence's cached prefix: holds the blocks, sets n_computed; false when it did not look (caching off,
  // or teacher forcing that needs the logits of those positions).
  bool reuse_prefix(Sequence &s);
  bool resumable() const;

  SchedulerLimits limits_;
  BlockManager &blocks_;
  StateSlots *slots_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // arrival order: index 0 is the oldest
  std::vector<std::unique_ptr<Sequence>> paused_;   // pause order: index 0 has waited for its consumer the longest
  int64_t preemptions_ = 0;
  int64_t prefix_queries_ = 0, prefix_query_tokens_ = 0, prefix_hit_tokens_ = 0;
};

}  // namespace vt
