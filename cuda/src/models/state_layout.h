// What a model keeps per sequence between steps, declared layer by layer (issue 21 point 4). Attention layers keep
// K and V per token, in the paged KV pool (the block manager hands out its blocks); a recurrent layer (the Gated
// DeltaNet layers of the hybrid Qwen3.5/3.6 models) keeps a fixed-size state per sequence, in a state slot that the
// sequence holds from admission until it finishes, is preempted or gives its state back while paused. A model says
// which of its layers keep what (the registry's state_layout); the memory plan sizes both pools from it, and the
// backends lay their caches out by it, so a new layer kind is a declaration here, not a new cache.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/config.h"

namespace vt {

struct LayerState {
  enum Kind : uint8_t {
    kNone,     // keeps nothing between steps
    kPagedKV,  // K and V of each token: n_kv_heads x head_dim each, in the KV pool's blocks
    kSlot,     // slot_elems values per sequence, in the sequence's state slot
  };
  Kind kind = kNone;
  // The layer's place among the layers of its kind: its K/V planes in the KV pool (kPagedKV), its part of a
  // state slot (kSlot: it starts at slot_offset elements into the slot).
  int32_t index = -1;
  int64_t slot_elems = 0, slot_offset = 0;  // kSlot
};

class StateLayout {
 public:
  // Every layer attention with K/V of n_kv_heads x head_dim per token: the dense models'.
  static StateLayout all_attention(const ModelConfig &c);
  StateLayout() = default;
  // Builds a layout layer by layer (in layer order): the paged layers share one (n_kv_heads, head_dim).
  StateLayout(int32_t n_kv_heads, int32_t head_dim) : n_kv_heads_(n_kv_heads), head_dim_(head_dim) {}
  void add_attention();
  void add_slot(int64_t elems);
  void add_stateless();

  const LayerState &layer(int32_t l) const { return layers_[size_t(l)]; }
  // An attention layer's place among the attention layers (its K/V planes in a backend's pool); throws
  // std::logic_error for a layer that keeps no K/V.
  int32_t kv_index(int32_t l) const;
  int32_t n_layers() const { return int32_t(layers_.size()); }
  int32_t n_paged() const { return n_paged_; }
  int32_t n_kv_heads() const { return n_kv_heads_; }
  int32_t head_dim() const { return head_dim_; }
  // K and V of one token over every paged layer, elem_bytes an element.
  int64_t kv_bytes_per_token(int64_t elem_bytes) const { return int64_t(n_paged_) * 2 * n_kv_heads_ * head_dim_ * elem_bytes; }
  // Values of one state slot over every slot layer (0: the model keeps no per-sequence state besides its K/V).
  int64_t slot_elems() const { return slot_elems_; }
  bool has_slots() const { return slot_elems_ > 0; }

 private:
  std::vector<LayerState> layers_;
  int32_t n_kv_heads_ = 0, head_dim_ = 0, n_paged_ = 0;
  int64_t slot_elems_ = 0;
};

}  // namespace vt
