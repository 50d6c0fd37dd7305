// The paged KV pool's device memory: 2 planes per attention layer (K, V), each n_blocks blocks of the same bytes,
// plane p's block b at base() + p * plane_stride() + b * plane_block_bytes — the layout the attention kernels read
// (CudaModelOps::set_kv), (attention layer, K|V, n_blocks, block_size, n_kv_heads, head_dim).
//
// A pool that grows (virtual memory management): the address range of the whole ceiling is reserved once
// (cuMemAddressReserve) and physical memory is mapped into it in chunks as the block manager needs blocks. A chunk is
// the same run of blocks in every plane, so it is one piece per plane (cuMemMap's offset must be 0: each piece is a
// handle of its own), and its block count is the fewest whose bytes in one plane are a whole number of the device's
// granules (kv_chunk_blocks; 64 blocks of 16 tokens for Qwen3's 8 KV heads x 128 in bf16 at 2 MiB). Addresses never
// move, so the captured decode graphs stay valid whatever is mapped. Each piece is zeroed when mapped (on the
// decoder's stream, before any step that follows): a graph's padding rows read block 0, and a tile of keys may read
// past a sequence's last position in its block, so nothing the kernels can read may be NaN. A trim unmaps and
// releases the chunks above what is kept, after the decoder's stream has finished its work.
//
// Without virtual memory management (the device attribute says so), or for a pool that must not grow (tests,
// the model checks), the pool is one allocation of a fixed size, zeroed.
//
// The CUDA decoder's state slots are such a pool too: one plane whose blocks are slots, padded (slot_layout) so that a
// chunk is a few slots rather than the hundred-odd whole granules an odd slot size would take; the kernels get the
// padded stride. Its zeroing is not needed (a fresh sequence reads no state) but does no harm.
//
// Running out of device memory while mapping is not an error: grow() maps what it can and says how far it got.
// Any other driver failure throws vt::Error (cuda::check). Not thread-safe: the engine's step thread grows and trims.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/driver.h"

namespace vt::cuda {

// The fewest blocks whose bytes in one plane (plane_block_bytes each) are a whole number of granules.
int32_t kv_chunk_blocks(int64_t plane_block_bytes, int64_t granularity);

// How a growing region of state slots (a KvPool of one plane whose blocks are slots) lays them out: `stride` bytes
// from one slot to the next (the slot's bytes, padded up), and `chunk` slots per chunk (kv_chunk_blocks of the
// stride). A slot's bytes are rarely a round number (Qwen3.5-0.8B's: 20,201,472, 2^14 x 1233), so unpadded the chunk
// would be 128 slots (2.6 GB mapped for the first request); padded to whole 2 MiB granules it is one slot, for 4%
// more per slot. slot_layout weighs the two, and the paddings between them: of the strides that round the slot up
// to a power of two (from a float, unpadded, to the granule), it takes the one whose worst waste is least, the waste
// being the bytes mapped beyond the slots held, at the worst count of slots held from 1 to n_slots (a chunk's worth
// mapped for its first slot, or every slot's padding when all are held); ties go to the smaller stride (the same
// memory, less of it padding).
struct SlotLayout {
  int64_t stride = 0;  // bytes, a multiple of 4 (the kernels take it in floats)
  int32_t chunk = 0;   // slots
};
SlotLayout slot_layout(int64_t slot_bytes, int32_t n_slots, int64_t granularity);

// Whether device `ordinal` can map memory in chunks (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), and
// the granularity of its physical allocations (recommended, else minimum; 2 MiB where the driver does not say).
// Asked without a context (the memory plan asks before one exists). Throws like driver() when CUDA is not usable.
struct KvPoolSupport {
  bool vmm = false;
  int64_t granularity = 0;
};
KvPoolSupport kv_pool_support(int ordinal);

// What a pool's messages call it and what they advise: the KV pool's by default; the CUDA decoder's state slots are
// a pool of one plane whose blocks are slots (slot_layout).
struct KvPoolNames {
  const char *pool = "KV pool";
  const char *blocks = "blocks";
  const char *fixed_advice = "kvCacheBytes or gpuMemoryUtilization sizes a larger one";  // no VMM: what gets more
  const char *base_advice = "lower maxContext (or kvCacheBytes, maxSeqs, maxBatchTokens)";  // no memory for the base
};

class KvPool {
 public:
  // planes: 2 per attention layer; plane_block_bytes: one block of one plane; n_blocks: the ceiling. grows: reserve
  // the ceiling and map chunks as needed, first base_blocks' worth (whole chunks, at most the ceiling), where the
  // device can (else, said on stderr, a fixed pool of base_blocks blocks: the ceiling falls to it); !grows: a fixed
  // pool of n_blocks blocks. `stream`: where mapped pieces are zeroed, and what a trim waits for. ctx must be current.
  KvPool(const Context &ctx, CUstream stream, int32_t planes, int64_t plane_block_bytes, int32_t n_blocks,
         int32_t base_blocks, bool grows, const KvPoolNames &names = {});
  ~KvPool();
  KvPool(const KvPool &) = delete;
  KvPool &operator=(const KvPool &) = delete;

  CUdeviceptr base() const { return base_; }
  CUdeviceptr plane_stride() const { return plane_stride_; }
  int32_t n_blocks() const { return n_blocks_; }  // the ceiling (a fixed pool: its size)
  int32_t chunk_blocks() const { return chunk_; }  // 0: a fixed pool
  int32_t mapped_blocks() const;                   // usable now
  int64_t mapped_bytes() const;                    // device memory held: the mapped pieces, or the fixed allocation
  int64_t reserved_bytes() const { return int64_t(plane_stride_) * planes_; }  // the address range
  int64_t ceiling_bytes() const { return int64_t(n_blocks_) * plane_block_bytes_ * planes_; }  // n_blocks' blocks

  // Maps chunks until the first `blocks` blocks (at most the ceiling) are usable; stops at the first chunk the device
  // has no memory for (none of it stays mapped). Returns mapped_blocks().
  int32_t grow(int32_t blocks);
  // Waits for the stream, then unmaps and releases the chunks above the first `blocks` blocks (rounded up to whole
  // chunks). Returns mapped_blocks().
  int32_t trim(int32_t blocks);

 private:
  bool map_chunk();    // the next chunk; false (and nothing of it mapped) when the device is out of memory
  void unmap_chunk();  // the last mapped chunk
  CUdeviceptr piece(int32_t plane, size_t chunk) const {
    return base_ + CUdeviceptr(plane) * plane_stride_ + CUdeviceptr(chunk) * piece_bytes_;
  }

  KvPoolNames names_;
  int ordinal_ = 0;
  CUstream stream_ = nullptr;
  int32_t planes_ = 0, n_blocks_ = 0, chunk_ = 0;
  int64_t plane_block_bytes_ = 0;
  size_t piece_bytes_ = 0;  // one chunk of one plane: whole granules
  CUdeviceptr base_ = 0, plane_stride_ = 0;
  bool reserved_ = false;   // base_ is a reserved range (a growing pool); else fixed_ holds the pool
  DeviceBuffer fixed_;
  std::vector<std::vector<CUmemGenericAllocationHandle>> chunks_;  // mapped chunks, in order: one handle per plane
};

}  // namespace vt::cuda
