// The per-sequence state's storage on the CPU backend, laid out by the model's StateLayout (models/state_layout.h):
// per attention layer, K and V pools of fixed-size blocks; per recurrent layer, its part of each state slot.
// Which block or slot belongs to which sequence is the block manager's and StateSlots' business (integers only);
// this holds bytes. Everything is one anonymous mapping, so blocks and slots never written cost no resident memory.
#pragma once

#include <cstdint>

#include "models/state_layout.h"

namespace vt {

class KvCache {
 public:
  KvCache(const StateLayout &layout, int32_t n_blocks, int32_t block_size, int32_t n_slots = 0);
  ~KvCache();
  KvCache(const KvCache &) = delete;
  KvCache &operator=(const KvCache &) = delete;

  // (n_blocks, block_size, n_kv_heads, head_dim) fp32 for one attention layer (a model layer index)
  float *k(int32_t layer) { return base_ + int64_t(layout_.kv_index(layer)) * 2 * layer_floats_; }
  float *v(int32_t layer) { return base_ + (int64_t(layout_.kv_index(layer)) * 2 + 1) * layer_floats_; }
  // The slot_elems fp32 values a recurrent layer keeps for the sequence holding `slot` (StateSlots).
  float *state(int32_t layer, int32_t slot);
  int64_t slot_stride() const { return layout_.slot_elems(); }  // floats from one slot's state to the next's

  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  int32_t n_slots() const { return n_slots_; }
  int64_t bytes() const { return bytes_; }
  int64_t resident_bytes() const;  // pages ever written (mincore)

 private:
  StateLayout layout_;
  float *base_ = nullptr;
  float *slots_ = nullptr;  // (n_slots, layout.slot_elems())
  int64_t layer_floats_ = 0;
  int64_t bytes_ = 0;
  int32_t n_blocks_, block_size_, n_slots_;
};

}  // namespace vt
