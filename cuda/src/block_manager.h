// Paged-KV bookkeeping, integers only: a free list of block ids and, per sequence, the block table that maps
// its token positions to blocks (position p lives in block table[p / block_size], slot p % block_size).
#pragma once

#include <cstdint>
#include <vector>

namespace vt {

class BlockManager {
 public:
  BlockManager(int32_t n_blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  int32_t n_free() const { return int32_t(free_.size()); }
  int32_t n_used() const { return n_blocks_ - n_free(); }

  int32_t blocks_for(int64_t n_tokens) const { return int32_t((n_tokens + block_size_ - 1) / block_size_); }

  // Extends `table` so it covers n_tokens positions. All or nothing: returns false and changes nothing when
  // the free list is too short.
  bool grow(std::vector<int32_t> &table, int64_t n_tokens);

  // Returns every block of `table` to the free list and clears it.
  void release(std::vector<int32_t> &table);

 private:
  int32_t n_blocks_, block_size_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first (warm in cache)
};

}  // namespace vt
