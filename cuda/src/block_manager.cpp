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
      limit_(n_blocks), chunk_(std::max(n_blocks, 1)) {
  set_mapped(n_blocks);
}

void BlockManager::set_growth(int32_t mapped, int32_t chunk, Resize resize) {
  resize_ = std::move(resize);
  chunk_ = std::max(chunk, 1);
  limit_ = n_blocks_;
  set_mapped(std::clamp(mapped, 0, n_blocks_));
}

void BlockManager::free_push(int32_t b) {
  free_.push_back(b);
  std::push_heap(free_.begin(), free_.end(), std::greater<int32_t>());
}

int32_t BlockManager::free_pop() {
  std::pop_heap(free_.begin(), free_.end(), std::greater<int32_t>());
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void BlockManager::set_mapped(int32_t mapped) {
  const int32_t before = mapped_;
  mapped_ = mapped;
  if (mapped < before) {  // the blocks above are neither held nor cached (trim): out of the free heap
    std::erase_if(free_, [&](int32_t b) { return b >= mapped; });
    std::make_heap(free_.begin(), free_.end(), std::greater<int32_t>());
  } else {
    free_.reserve(size_t(mapped));
    for (int32_t b = before; b < mapped; ++b) free_push(b);
  }
  refs_.resize(size_t(mapped), 0);
  if (!caching_) return;
  serial_.resize(size_t(mapped), 0);
  parent_.resize(size_t(mapped), 0);
  hash_.resize(size_t(mapped), 0);
  tokens_.resize(size_t(mapped) * size_t(block_size_), 0);
  prev_.resize(size_t(mapped), -1);
  next_.resize(size_t(mapped), -1);
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

void BlockManager::drop_entry(int32_t b) {
  auto [lo, hi] = index_.equal_range(hash_[size_t(b)]);
  for (auto it = lo; it != hi; ++it)
    if (it->second == b) {
      index_.erase(it);
      break;
    }
  serial_[size_t(b)] = 0;  // its children, if still cached, can no longer be reached (their parent serial is gone)
}

void BlockManager::evict(int32_t b) {
  drop_entry(b);
  ++evictions_;
}

int32_t BlockManager::take() {
  int32_t b;
  if (!free_.empty()) {
    b = free_pop();
  } else {  // grow checked there are enough: the eviction order is not empty
    b = lru_head_;
    lru_unlink(b);
    evict(b);
  }
  refs_[size_t(b)] = 1;
  return b;
}

bool BlockManager::map_more(int32_t blocks) {
  const int64_t chunks = (int64_t(mapped_) + blocks + chunk_ - 1) / chunk_;
  const int32_t want = int32_t(std::min<int64_t>(limit_, chunks * chunk_));
  if (want <= mapped_) return false;
  // (clamped: the backend never takes back what was mapped while growing, nor maps past what was asked)
  const int32_t got = std::clamp(resize_(want), mapped_, want);
  if (got < want) limit_ = got;  // the device's memory ends here, for now: n_free() stops counting the rest
  const int32_t before = mapped_;
  set_mapped(got);
  return got - before >= blocks;
}

bool BlockManager::grow(std::vector<int32_t> &table, int64_t n_tokens) {
  const int32_t need = blocks_for(n_tokens) - int32_t(table.size());
  if (need <= 0) return true;
  if (need > n_free()) return false;
  // Free and evictable blocks first: the pool maps more only for what the sequences hold, never for the cache.
  const int32_t short_by = need - (int32_t(free_.size()) + n_evictable_);
  if (short_by > 0 && !map_more(short_by)) return false;
  for (int32_t i = 0; i < need; ++i) table.push_back(take());
  return true;
}

int32_t BlockManager::top() const {
  for (int32_t b = mapped_ - 1; b >= 0; --b)
    if (refs_[size_t(b)] > 0 || (caching_ && serial_[size_t(b)] != 0)) return b + 1;
  return 0;
}

int32_t BlockManager::trim(int32_t keep) {
  if (!resize_) return mapped_;
  limit_ = n_blocks_;  // memory may have come free since a grow came short: the next one asks again
  int32_t held = 0;
  for (int32_t b = mapped_ - 1; b >= 0 && held == 0; --b)
    if (refs_[size_t(b)] > 0) held = b + 1;
  const int64_t chunks = (int64_t(std::max(keep, held)) + chunk_ - 1) / chunk_;
  const int32_t target = int32_t(std::min<int64_t>(n_blocks_, chunks * chunk_));
  if (target >= mapped_) return mapped_;
  // Cached blocks above it are unheld (held < target): dropped from the cache, free until their chunks go.
  if (caching_)
    for (int32_t b = target; b < mapped_; ++b)
      if (serial_[size_t(b)] != 0) {
        lru_unlink(b);
        drop_entry(b);
        ++trimmed_;
        free_push(b);
      }
  set_mapped(std::clamp(resize_(target), target, mapped_));
  return mapped_;
}

void BlockManager::release(std::vector<int32_t> &table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    if (--refs_[size_t(b)] > 0) continue;  // another sequence still reads it
    if (caching_ && serial_[size_t(b)] != 0) lru_push(b);
    else free_push(b);
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
