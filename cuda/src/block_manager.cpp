#include "block_manager.h"

namespace vt {

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size) : n_blocks_(n_blocks), block_size_(block_size) {
  free_.reserve(n_blocks);
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out 0, 1, 2, ... first
}

bool BlockManager::grow(std::vector<int32_t> &table, int64_t n_tokens) {
  const int32_t need = blocks_for(n_tokens) - int32_t(table.size());
  if (need <= 0) return true;
  if (need > n_free()) return false;
  for (int32_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void BlockManager::release(std::vector<int32_t> &table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace vt
