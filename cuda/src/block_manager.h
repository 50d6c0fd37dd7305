// Paged-KV bookkeeping, integers only: which blocks are free, who holds which, and, per sequence, the block table
// that maps its token positions to blocks (position p lives in block table[p / block_size], slot p % block_size).
//
// A pool that grows (set_growth; the CUDA decoder's, whose device memory is mapped in chunks as blocks are needed):
// n_blocks() is the ceiling, n_mapped() the blocks usable now. A grow that finds too few blocks free or evictable
// among the mapped ones asks the backend, through the resize callback, to map whole chunks more; when the backend
// maps fewer than asked (the device ran out of memory before the ceiling), the mapped count becomes the ceiling
// until the next trim, so n_free() never again counts blocks that cannot be had and the scheduler preempts or waits
// as it does when a fixed pool is full. The lowest free block is always handed out first, so the blocks in use stay
// at the bottom of the pool and the chunks above them can be given back: trim(keep) unmaps everything above the
// first `keep` blocks and the highest block a sequence holds, evicting the cached blocks nobody holds that lie
// there (see trim()).
//
// The prefix cache (on when constructed with prefix_caching): a block whose block_size positions all hold K/V is
// published under its identity, (the entry of the block before it, its block_size token ids), so that a later
// sequence whose tokens start the same way reuses it instead of computing it again (shared system prompts,
// multi-turn chats). Only full blocks are shared, and only read: a sequence writes K/V at positions past what it
// reused, which lie in blocks of its own. Blocks are reference-counted; when the last holder lets go of a cached
// block it stays cached but evictable, and a grow takes a truly free block first, then evicts the least recently
// released cached one, and maps more of a growing pool only when neither is left (the cache lives in what the
// sequences' own demand has mapped; it never makes the pool grow).
//
// Identity is exact, not a hash: each cache entry gets a serial number never reused, and a block's key is its
// parent entry's serial and its own tokens, compared in full on a lookup (the 64-bit hash of the key only picks
// the bucket). So two different prefixes can never share an entry, whatever the hash does, and an entry whose
// parent was evicted can no longer be reached (its parent's serial is gone with it) instead of being taken for the
// child of a newer block that got the same block id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace vt {

// How far a sequence's tokens are identified in the prefix cache: its first n_blocks full blocks, the last of them
// by the entry `serial`, which lives in block `block` (a sequence may hold its own copy of a block another one
// published first: `block` is then not in its table). Reset whenever the sequence gives its blocks back.
struct PrefixChain {
  int32_t n_blocks = 0;
  uint64_t serial = 0;  // 0: the empty prefix (the root)
  int32_t block = -1;
};

class BlockManager {
 public:
  // The backend's side of a growing pool: make the first `blocks` blocks usable, mapping or unmapping whole chunks,
  // and return how many are usable after: `blocks` (or more, up to a chunk boundary) when it could, fewer than asked
  // when growing ran out of device memory part-way (what was mapped stays mapped). Called on the step thread only.
  using Resize = std::function<int32_t(int32_t blocks)>;

  // hash_mask: ANDed into every key's hash; tests pass 0 so that every key collides (lookups must stay exact).
  // Every block is usable from the start (a fixed pool) unless set_growth says otherwise.
  BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_caching = false, uint64_t hash_mask = ~uint64_t(0));

  // Makes the pool grow with demand: the first `mapped` blocks are usable now (none may be held yet), more come in
  // chunks of `chunk` blocks (the last one may end at n_blocks) through `resize`.
  void set_growth(int32_t mapped, int32_t chunk, Resize resize);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }  // the ceiling
  int32_t n_mapped() const { return mapped_; }    // usable now, without asking the backend
  // What the pool may grow to now: n_blocks(), or the mapped count once the backend came short (until a trim).
  int32_t n_limit() const { return limit_; }
  bool grows() const { return bool(resize_); }
  int32_t chunk() const { return chunk_; }
  // Blocks a grow can take: the truly free ones, the cached ones no sequence holds (evicted when taken), and those
  // the pool may still map.
  int32_t n_free() const { return int32_t(free_.size()) + n_evictable_ + (limit_ - mapped_); }
  // Blocks some sequence holds (a block shared by several counts once).
  int32_t n_used() const { return mapped_ - int32_t(free_.size()) - n_evictable_; }
  // Blocks in the prefix cache, held or not.
  int32_t n_cached() const { return int32_t(index_.size()); }
  int32_t n_evictable() const { return n_evictable_; }
  int64_t evictions() const { return evictions_; }  // cached blocks taken for new K/V
  int64_t trimmed() const { return trimmed_; }      // cached blocks dropped by trims (their chunks given back)
  int32_t refs(int32_t block) const { return refs_[size_t(block)]; }
  bool cached(int32_t block) const { return caching_ && serial_[size_t(block)] != 0; }
  bool caching() const { return caching_; }
  // 1 + the highest block a sequence holds or the cache keeps (0: none): the blocks below it must stay mapped for
  // everything the pool knows to stay valid.
  int32_t top() const;

  int32_t blocks_for(int64_t n_tokens) const { return int32_t((n_tokens + block_size_ - 1) / block_size_); }

  // Extends `table` so it covers n_tokens positions with blocks of its own, mapping chunks of a growing pool when
  // the mapped blocks are short. All or nothing: returns false and changes no table when fewer than that many
  // blocks are free, evictable or mappable (chunks mapped before the backend came short stay mapped and free).
  bool grow(std::vector<int32_t> &table, int64_t n_tokens);

  // Gives a growing pool's chunks back (a fixed pool: nothing happens). Keeps the first max(keep, 1 + the highest
  // block a sequence holds) blocks, rounded up to whole chunks; the cached blocks nobody holds above that are
  // evicted (their prefixes are computed again if asked for) and the chunks they were in unmapped. The ceiling
  // goes back to n_blocks(): a later grow tries the device again. Returns the blocks mapped after.
  int32_t trim(int32_t keep);

  // Lets go of every block of `table` and clears it. A block nobody holds any more goes back to the free blocks, or,
  // when cached, to the most recent end of the eviction order (the table's last block first, so a sequence's deeper
  // blocks are evicted before the prefix they continue).
  void release(std::vector<int32_t> &table);

  // Prefix cache. match: `table` must be empty; appends (and holds) the cached blocks that hold tokens[0, k) for the
  // largest k <= max_tokens that is a whole number of blocks found in the cache from the first block on, sets chain
  // to them and returns k (0 when caching is off).
  int32_t match(const int32_t *tokens, int32_t max_tokens, std::vector<int32_t> &table, PrefixChain &chain);
  // Publishes the blocks of `table` that tokens[0, n_computed) fill completely and chain does not cover yet, in
  // order, each under its parent's entry, and advances chain. A block whose key is cached already (another sequence
  // computed the same prefix at the same time) stays private and chain follows the cached entry. Stops once chain's
  // entry has been evicted: nothing after it could be found.
  void publish(const int32_t *tokens, int32_t n_computed, const std::vector<int32_t> &table, PrefixChain &chain);

 private:
  int32_t take();                   // a block for new K/V: the lowest free one, else the least recently used cached one
  void evict(int32_t block);        // drops a cached block's entry to take it for new K/V (counted in evictions)
  void drop_entry(int32_t block);   // drops a cached block's entry
  bool map_more(int32_t blocks);    // maps at least `blocks` more (whole chunks); false when the backend came short
  void set_mapped(int32_t mapped);  // sizes the per-block arrays and the free heap to `mapped` blocks
  void free_push(int32_t block);
  int32_t free_pop();
  int32_t find(uint64_t hash, uint64_t parent, const int32_t *tokens) const;  // the cached block with this key, or -1
  uint64_t key_hash(uint64_t parent, const int32_t *tokens) const;
  void lru_push(int32_t block);     // at the most recent end
  void lru_unlink(int32_t block);

  int32_t n_blocks_, block_size_;
  bool caching_;
  uint64_t hash_mask_;
  int32_t mapped_ = 0, limit_ = 0, chunk_ = 0;
  Resize resize_;               // empty: a fixed pool (every block mapped from the start)
  // A min-heap of the free mapped blocks (the lowest is handed out first, so used blocks stay compact at the bottom
  // and the chunks above them can be unmapped). The per-block arrays below cover the mapped blocks only, so a
  // pool's host bookkeeping grows with it too.
  std::vector<int32_t> free_;
  std::vector<int32_t> refs_;   // per block: the sequences holding it
  // The cache, per block (serial 0: not cached), and its index from key hash to block.
  std::vector<uint64_t> serial_, parent_, hash_;
  std::vector<int32_t> tokens_;  // (mapped blocks, block_size) the token ids of each cached block
  std::unordered_multimap<uint64_t, int32_t> index_;
  uint64_t next_serial_ = 1;
  // Cached blocks nobody holds, least recently released first: a doubly linked list over block ids.
  std::vector<int32_t> prev_, next_;
  int32_t lru_head_ = -1, lru_tail_ = -1, n_evictable_ = 0;
  int64_t evictions_ = 0, trimmed_ = 0;
};

}  // namespace vt
