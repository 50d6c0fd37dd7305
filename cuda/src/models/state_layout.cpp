#include "models/state_layout.h"

#include <stdexcept>
#include <string>

namespace vt {

StateLayout StateLayout::all_attention(const ModelConfig &c) {
  StateLayout s(c.n_kv_heads, c.head_dim);
  for (int32_t l = 0; l < c.n_layers; ++l) s.add_attention();
  return s;
}

int32_t StateLayout::kv_index(int32_t l) const {
  if (l < 0 || l >= n_layers() || layers_[size_t(l)].kind != LayerState::kPagedKV)
    throw std::logic_error("layer " + std::to_string(l) + " keeps no K/V");
  return layers_[size_t(l)].index;
}

void StateLayout::add_attention() {
  LayerState L;
  L.kind = LayerState::kPagedKV, L.index = n_paged_++;
  layers_.push_back(L);
}

void StateLayout::add_slot(int64_t elems) {
  LayerState L;
  L.kind = LayerState::kSlot;
  L.index = 0;
  for (const LayerState &x : layers_) L.index += x.kind == LayerState::kSlot;
  L.slot_elems = elems, L.slot_offset = slot_elems_;
  slot_elems_ += elems;
  layers_.push_back(L);
}

void StateLayout::add_stateless() { layers_.push_back(LayerState{}); }

}  // namespace vt
