// The state slots of a model whose layers keep a fixed-size state per sequence (models/state_layout.h: the
// recurrent layers of the hybrid models), integers only, as the block manager is for the paged KV: which slots
// are free. A sequence takes one when it is admitted and holds it while it runs or is paused with its state; it
// gives it back when it finishes, is preempted, or gives its state back while paused (then it is recomputed from
// its tokens, as with its KV blocks). The bytes are the backend's (the CPU KvCache, the CUDA decoder's region).
//
// The lowest free slot is always handed out first, so the held slots stay packed at the bottom and a mapped prefix
// of the slots is all a backend needs to hold.
//
// A set that grows (set_growth; the CUDA decoder's, whose device memory is mapped in chunks as slots are needed, as
// the paged KV pool's is: BlockManager): n_slots() is the ceiling, n_mapped() the slots usable now. A take() whose
// lowest free slot lies at or above the mapped ones asks the backend, through the resize callback, to make that
// many usable, in whole chunks; when the backend maps fewer (the device ran out of memory before the ceiling), the
// take() gets no slot (-1: the scheduler waits or takes a paused sequence's, as when a fixed set is all held) and
// the mapped count becomes the limit until the next trim, so the device is not asked again at every step.
// trim(keep) gives the chunks above max(keep, 1 + the highest held slot) back.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace vt {

class StateSlots {
 public:
  // The backend's side of a growing set: make the first `slots` slots usable, mapping or unmapping whole chunks, and
  // return how many are usable after: `slots` (or more, up to a chunk boundary) when it could, fewer than asked when
  // growing ran out of device memory part-way (what was mapped stays mapped). Called on the step thread only.
  using Resize = std::function<int32_t(int32_t slots)>;

  // n slots, every one usable from the start (a fixed set) unless set_growth says otherwise.
  explicit StateSlots(int32_t n);

  // Makes the set grow with demand: the first `mapped` slots are usable now (none may be held yet), more come in
  // chunks of `chunk` slots (the last one may end at n_slots()) through `resize`.
  void set_growth(int32_t mapped, int32_t chunk, Resize resize);

  int32_t n_slots() const { return n_; }         // the ceiling
  int32_t n_mapped() const { return mapped_; }   // usable now, without asking the backend
  // What the set may grow to now: n_slots(), or the mapped count once the backend came short (until a trim).
  int32_t n_limit() const { return limit_; }
  int32_t n_held() const { return held_; }
  // Slots a take() may still get: the free ones below the limit (mapped or not).
  int32_t n_free() const { return limit_ - held_; }
  bool grows() const { return bool(resize_); }
  int32_t chunk() const { return chunk_; }
  // 1 + the highest slot held (0: none): the slots below it must stay mapped.
  int32_t top() const;

  // The lowest free slot, mapping the chunks up to it first when it lies above the mapped ones; -1 when every slot
  // below the limit is held, or the backend could not map the one that would be handed out.
  int32_t take();
  // Gives `slot` back (-1: none held) and sets it to -1.
  void release(int32_t &slot);

  // Gives a growing set's chunks back (a fixed set: nothing happens). Keeps the first max(keep, top()) slots, rounded
  // up to whole chunks. The limit goes back to n_slots(): a later take() tries the device again. Returns the slots
  // mapped after.
  int32_t trim(int32_t keep);

 private:
  int32_t map_up_to(int32_t slots);  // asks the backend for the first `slots` (whole chunks); returns mapped_ after
  int32_t whole_chunks(int64_t slots) const;  // rounded up to whole chunks, at most the ceiling

  int32_t n_;
  int32_t mapped_, limit_, chunk_;
  int32_t held_ = 0;
  Resize resize_;              // empty: a fixed set (every slot usable from the start)
  std::vector<int32_t> free_;  // a min-heap of every free slot, mapped or not
  std::vector<uint8_t> taken_;  // per slot: held by a sequence
};

}  // namespace vt
