// The state slots of a model whose layers keep a fixed-size state per sequence (models/state_layout.h: the
// recurrent layers of the hybrid models), integers only, as the block manager is for the paged KV: which slots
// are free. A sequence takes one when it is admitted and holds it while it runs or is paused with its state; it
// gives it back when it finishes, is preempted, or gives its state back while paused (then it is recomputed from
// its tokens, as with its KV blocks). The bytes are the backend's (the CPU KvCache, the CUDA decoder's buffer).
#pragma once

#include <cstdint>
#include <vector>

namespace vt {

class StateSlots {
 public:
  explicit StateSlots(int32_t n) : n_(n) {
    for (int32_t i = n - 1; i >= 0; --i) free_.push_back(i);  // slot 0 taken first
  }
  int32_t n_slots() const { return n_; }
  int32_t n_free() const { return int32_t(free_.size()); }
  // A free slot, or -1 when every one is held.
  int32_t take() {
    if (free_.empty()) return -1;
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  // Gives `slot` back (-1: none held) and sets it to -1.
  void release(int32_t &slot) {
    if (slot >= 0) free_.push_back(slot);
    slot = -1;
  }

 private:
  int32_t n_;
  std::vector<int32_t> free_;
};

}  // namespace vt
