#include "block_manager.h"

#include <algorithm>

namespace vt {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_caching, uint64_t hash_mask)
    : n_blocks_(n_blocks), block_size_(block_size), caching_(prefix_caching), hash_mask_(hash_mask),
      refs_(size_t(n_blocks), 0) {
  free_.reserve(size_t(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out 0, 1, 2, ... first
  if (!caching_) return;
  serial_.assign(size_t(n_blocks), 0);
  parent_.assign(size_t(n_blocks), 0);
  hash_.assign(size_t(n_blocks), 0);
  tokens_.assign(size_t(n_blocks) * size_t(block_size), 0);
  prev_.assign(size_t(n_blocks), -1);
  next_.assign(size_t(n_blocks), -1);
}

void BlockManager::lru_push(int32_t b) {
  prev_[size_t(b)] = lru_tail_;
  next_[size_t(b)] = -1;
  if (lru_tail_ >= 0) next_[size_t(lru_tail_)] = b;
  else lru_head_ = b;
  lru_tail_ = b;
  ++n_evictable_;
}

void BlockManager::lru_unlink(int32_t b) {
  const int32_t p = prev_[size_t(b)], n = next_[size_t(b)];
  if (p >= 0) next_[size_t(p)] = n;
  else lru_head_ = n;
  if (n >= 0) prev_[size_t(n)] = p;
  else lru_tail_ = p;
  prev_[size_t(b)] = next_[size_t(b)] = -1;
  --n_evictable_;
}

void BlockManager::evict(int32_t b) {
  auto [lo, hi] = index_.equal_range(hash_[size_t(b)]);
  for (auto it = lo; it != hi; ++it)
    if (it->second == b) {
      index_.erase(it);
      break;
    }
  serial_[size_t(b)] = 0;  // its children, if still cached, can no longer be reached (their parent serial is gone)
  ++evictions_;
}

int32_t BlockManager::take() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {  // grow checked n_free(): the eviction order is not empty
    b = lru_head_;
    lru_unlink(b);
    evict(b);
  }
  refs_[size_t(b)] = 1;
  return b;
}

bool BlockManager::grow(std::vector<int32_t> &table, int64_t n_tokens) {
  const int32_t need = blocks_for(n_tokens) - int32_t(table.size());
  if (need <= 0) return true;
  if (need > n_free()) return false;
  for (int32_t i = 0; i < need; ++i) table.push_back(take());
  return true;
}

void BlockManager::release(std::vector<int32_t> &table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    if (--refs_[size_t(b)] > 0) continue;  // another sequence still reads it
    if (caching_ && serial_[size_t(b)] != 0) lru_push(b);
    else free_.push_back(b);
  }
  table.clear();
}

uint64_t BlockManager::key_hash(uint64_t parent, const int32_t *tokens) const {
  uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ull);
  for (int32_t i = 0; i < block_size_; ++i) h = mix64(h ^ uint32_t(tokens[i]));
  return h & hash_mask_;
}

int32_t BlockManager::find(uint64_t hash, uint64_t parent, const int32_t *tokens) const {
  auto [lo, hi] = index_.equal_range(hash);
  for (auto it = lo; it != hi; ++it) {
    const int32_t b = it->second;
    const int32_t *cached = tokens_.data() + int64_t(b) * block_size_;
    if (parent_[size_t(b)] == parent && std::equal(tokens, tokens + block_size_, cached)) return b;
  }
  return -1;
}

int32_t BlockManager::match(const int32_t *tokens, int32_t max_tokens, std::vector<int32_t> &table, PrefixChain &chain) {
  chain = PrefixChain{};
  if (!caching_ || !table.empty()) return 0;
  const int32_t bs = block_size_;
  for (int32_t k = 0; int64_t(k + 1) * bs <= max_tokens; ++k) {
    const int32_t *t = tokens + int64_t(k) * bs;
    const int32_t b = find(key_hash(chain.serial, t), chain.serial, t);
    if (b < 0) break;
    if (refs_[size_t(b)]++ == 0) lru_unlink(b);  // held again: no longer evictable
    table.push_back(b);
    chain = PrefixChain{k + 1, serial_[size_t(b)], b};
  }
  return chain.n_blocks * bs;
}

void BlockManager::publish(const int32_t *tokens, int32_t n_computed, const std::vector<int32_t> &table,
                           PrefixChain &chain) {
  if (!caching_) return;
  const int32_t full = std::min(n_computed / block_size_, int32_t(table.size()));
  for (int32_t k = chain.n_blocks; k < full; ++k) {
    if (chain.n_blocks > 0 && serial_[size_t(chain.block)] != chain.serial) return;  // its parent was evicted
    const int32_t *t = tokens + int64_t(k) * block_size_;
    const uint64_t h = key_hash(chain.serial, t);
    int32_t b = find(h, chain.serial, t);
    if (b < 0) {  // new: this sequence's own block becomes the entry
      b = table[size_t(k)];
      if (serial_[size_t(b)] != 0) return;  // (never: blocks past chain are the sequence's own, unpublished)
      serial_[size_t(b)] = next_serial_++;
      parent_[size_t(b)] = chain.serial;
      hash_[size_t(b)] = h;
      std::copy(t, t + block_size_, tokens_.begin() + int64_t(b) * block_size_);
      index_.emplace(h, b);
    }
    chain = PrefixChain{k + 1, serial_[size_t(b)], b};
  }
}

}  // namespace vt
