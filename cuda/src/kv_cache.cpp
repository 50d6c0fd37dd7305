#include "kv_cache.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "residency.h"
#include "status.h"

namespace vt {

KvCache::KvCache(const StateLayout &layout, int32_t n_blocks, int32_t block_size, int32_t n_slots)
    : layout_(layout), n_blocks_(n_blocks), block_size_(block_size), n_slots_(n_slots) {
  layer_floats_ = int64_t(n_blocks) * block_size * layout.n_kv_heads() * layout.head_dim();
  const int64_t kv_floats = layer_floats_ * 2 * layout.n_paged();
  const int64_t slot_floats = int64_t(n_slots) * layout.slot_elems();
  bytes_ = (kv_floats + slot_floats) * int64_t(sizeof(float));
  if (bytes_ == 0) return;
  void *p = mmap(nullptr, size_t(bytes_), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail(VT_ERR_OUT_OF_MEMORY, "cannot reserve " + std::to_string(bytes_) + " bytes for the KV cache: " + std::strerror(errno) +
                                   " (lower kvCacheBytes or maxContext)");
  base_ = static_cast<float *>(p);
  slots_ = base_ + kv_floats;
}

float *KvCache::state(int32_t layer, int32_t slot) {
  const LayerState &L = layout_.layer(layer);
  if (L.kind != LayerState::kSlot || slot < 0 || slot >= n_slots_)
    throw std::logic_error("KvCache: no state slot " + std::to_string(slot) + " for layer " + std::to_string(layer));
  return slots_ + int64_t(slot) * layout_.slot_elems() + L.slot_offset;
}

int64_t KvCache::resident_bytes() const { return base_ ? vt::resident_bytes(base_, size_t(bytes_)) : 0; }

KvCache::~KvCache() {
  if (base_) munmap(base_, size_t(bytes_));
}

}  // namespace vt
