#include "backend/cuda/kv_pool.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>

#include "status.h"

namespace vt::cuda {

namespace {

constexpr int64_t kDefaultGranularity = int64_t(2) << 20;

CUmemAllocationProp device_prop(int ordinal) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  return prop;
}

}  // namespace

int32_t kv_chunk_blocks(int64_t plane_block_bytes, int64_t granularity) {
  if (plane_block_bytes <= 0 || granularity <= 0) return 1;
  return int32_t(granularity / std::gcd(granularity, plane_block_bytes));
}

namespace {

// The most a region of these slots maps beyond the slots held: the first slot of the last chunk, held alone in it,
// with every chunk below full (the worst count: the waste grows chunk by chunk, and falls within one as it fills).
int64_t worst_waste(int64_t slot_bytes, int32_t n_slots, const SlotLayout &l) {
  const int64_t full_chunks = (int64_t(std::max(n_slots, 1)) - 1) / l.chunk;
  const int64_t held = full_chunks * l.chunk + 1;
  return (full_chunks + 1) * l.chunk * l.stride - held * slot_bytes;
}

}  // namespace

SlotLayout slot_layout(int64_t slot_bytes, int32_t n_slots, int64_t granularity) {
  const int64_t g = granularity > 0 ? granularity : kDefaultGranularity;
  // Unpadded (a slot is whole floats), then each power of two that divides the granule, then the granule itself
  // (already the last of them unless a granule is not a power of two: never seen, but cheap to allow).
  std::vector<int64_t> aligns;
  for (int64_t a = 4; a <= g && g % a == 0; a *= 2) aligns.push_back(a);
  if (aligns.empty() || aligns.back() != g) aligns.push_back(g);
  SlotLayout best;
  int64_t best_waste = -1;
  for (const int64_t a : aligns) {
    SlotLayout l;
    l.stride = (slot_bytes + a - 1) / a * a;
    l.chunk = kv_chunk_blocks(l.stride, g);
    const int64_t waste = worst_waste(slot_bytes, n_slots, l);
    if (best_waste < 0 || waste < best_waste || (waste == best_waste && l.stride < best.stride)) best = l, best_waste = waste;
  }
  return best;
}

KvPoolSupport kv_pool_support(int ordinal) {
  const Driver &d = driver();
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  int vmm = 0;
  KvPoolSupport s;
  if (d.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS) vmm = 0;
  s.vmm = vmm != 0;
  const CUmemAllocationProp prop = device_prop(ordinal);
  size_t g = 0;
  if (d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS || g == 0)
    if (d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) g = 0;
  s.granularity = g > 0 ? int64_t(g) : kDefaultGranularity;
  return s;
}

KvPool::KvPool(const Context &ctx, CUstream stream, int32_t planes, int64_t plane_block_bytes, int32_t n_blocks,
               int32_t base_blocks, bool grows, const KvPoolNames &names)
    : names_(names), ordinal_(ctx.ordinal()), stream_(stream), planes_(std::max(planes, 0)), n_blocks_(std::max(n_blocks, 0)),
      plane_block_bytes_(plane_block_bytes) {
  base_blocks = std::clamp(base_blocks > 0 ? base_blocks : n_blocks_, 0, n_blocks_);
  const Driver &d = driver();
  KvPoolSupport support;
  if (grows) {
    support = kv_pool_support(ordinal_);
    if (!support.vmm) {
      std::fprintf(stderr,
                   "vtengine: %s cannot map memory in chunks (no virtual memory management): %s of %d %s, allocated "
                   "whole at load; %s\n",
                   ctx.name().c_str(), names_.pool, base_blocks, names_.blocks, names_.fixed_advice);
      n_blocks_ = base_blocks;
      grows = false;
    }
  }
  if (!grows || planes_ == 0 || n_blocks_ == 0) {
    // One allocation, zeroed so that the padding rows of a graph replay (which read block 0) compute on finite values.
    plane_stride_ = CUdeviceptr(int64_t(n_blocks_) * plane_block_bytes_);
    fixed_ = DeviceBuffer(size_t(plane_stride_) * size_t(planes_));
    if (fixed_.bytes())
      check(d.cuMemsetD8Async(fixed_.ptr(), 0, fixed_.bytes(), stream_), std::string("cuMemsetD8Async(") + names_.pool + ")");
    base_ = fixed_.ptr();
    return;
  }
  chunk_ = kv_chunk_blocks(plane_block_bytes_, support.granularity);
  piece_bytes_ = size_t(int64_t(chunk_) * plane_block_bytes_);
  const int64_t n_chunks = (int64_t(n_blocks_) + chunk_ - 1) / chunk_;
  plane_stride_ = CUdeviceptr(n_chunks * int64_t(piece_bytes_));
  check(d.cuMemAddressReserve(&base_, size_t(plane_stride_) * size_t(planes_), size_t(support.granularity), 0, 0),
        "cuMemAddressReserve(" + std::to_string(uint64_t(plane_stride_) * uint64_t(planes_)) + " bytes)");
  reserved_ = true;
  chunks_.reserve(size_t(n_chunks));
  try {
    if (grow(base_blocks) < base_blocks)
      fail(VT_ERR_OUT_OF_MEMORY, std::string("the GPU has no memory for the ") + names_.pool + "'s first " +
                                     std::to_string(base_blocks) + " " + names_.blocks + "; " + names_.base_advice);
  } catch (...) {
    while (!chunks_.empty()) unmap_chunk();  // (the destructor does not run for a throwing constructor)
    d.cuMemAddressFree(base_, size_t(plane_stride_) * size_t(planes_));
    throw;
  }
}

KvPool::~KvPool() {
  try {
    while (!chunks_.empty()) unmap_chunk();
  } catch (...) {  // (unmap_chunk takes the chunk off the list before it throws: the loop ends)
  }
  if (reserved_) driver().cuMemAddressFree(base_, size_t(plane_stride_) * size_t(planes_));
}

int32_t KvPool::mapped_blocks() const {
  if (!reserved_) return n_blocks_;
  return int32_t(std::min<int64_t>(n_blocks_, int64_t(chunks_.size()) * chunk_));
}

int64_t KvPool::mapped_bytes() const {
  if (!reserved_) return int64_t(fixed_.bytes());
  return int64_t(chunks_.size()) * int64_t(piece_bytes_) * planes_;
}

bool KvPool::map_chunk() {
  const Driver &d = driver();
  const size_t k = chunks_.size();
  const CUmemAllocationProp prop = device_prop(ordinal_);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::vector<CUmemGenericAllocationHandle> handles;
  handles.reserve(size_t(planes_));
  // Undoes this chunk's pieces so far (the piece being mapped is unmapped by the caller's failure path below).
  auto undo = [&]() {
    for (size_t p = 0; p < handles.size(); ++p) {
      d.cuMemUnmap(piece(int32_t(p), k), piece_bytes_);
      d.cuMemRelease(handles[p]);
    }
  };
  for (int32_t p = 0; p < planes_; ++p) {
    CUmemGenericAllocationHandle h = 0;
    CUresult r = d.cuMemCreate(&h, piece_bytes_, &prop, 0);
    if (r == CUDA_SUCCESS) {
      r = d.cuMemMap(piece(p, k), piece_bytes_, 0, h, 0);
      if (r != CUDA_SUCCESS) d.cuMemRelease(h);
    }
    if (r == CUDA_SUCCESS) {
      r = d.cuMemSetAccess(piece(p, k), piece_bytes_, &access, 1);
      if (r != CUDA_SUCCESS) {
        d.cuMemUnmap(piece(p, k), piece_bytes_);
        d.cuMemRelease(h);
      }
    }
    if (r != CUDA_SUCCESS) {
      undo();
      if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;  // the ceiling is lower than thought: the caller stops here
      check(r, std::string("mapping ") + names_.pool + " chunk " + std::to_string(k) + " (plane " + std::to_string(p) + ")");
    }
    handles.push_back(h);
  }
  chunks_.push_back(std::move(handles));
  // Zeroed before any later work on the stream reads it (see kv_pool.h). A failure here leaves the chunk mapped and
  // counted, so the destructor or a trim gives it back.
  for (int32_t p = 0; p < planes_; ++p)
    check(d.cuMemsetD8Async(piece(p, k), 0, piece_bytes_, stream_), std::string("cuMemsetD8Async(") + names_.pool + " chunk)");
  return true;
}

void KvPool::unmap_chunk() {
  const Driver &d = driver();
  const size_t k = chunks_.size() - 1;
  const std::vector<CUmemGenericAllocationHandle> handles = std::move(chunks_.back());
  chunks_.pop_back();  // no longer counted, whatever happens below: nothing may be handed out there again
  CUresult first = CUDA_SUCCESS;
  for (size_t p = 0; p < handles.size(); ++p) {
    CUresult r = d.cuMemUnmap(piece(int32_t(p), k), piece_bytes_);
    if (r == CUDA_SUCCESS) r = d.cuMemRelease(handles[p]);
    if (first == CUDA_SUCCESS) first = r;
  }
  check(first, std::string("unmapping ") + names_.pool + " chunk " + std::to_string(k));
}

int32_t KvPool::grow(int32_t blocks) {
  if (!reserved_) return mapped_blocks();
  const int64_t want = (int64_t(std::min(blocks, n_blocks_)) + chunk_ - 1) / chunk_;
  while (int64_t(chunks_.size()) < want)
    if (!map_chunk()) break;
  return mapped_blocks();
}

int32_t KvPool::trim(int32_t blocks) {
  if (!reserved_) return mapped_blocks();
  const size_t keep = size_t((int64_t(std::max(blocks, 0)) + chunk_ - 1) / chunk_);
  if (keep >= chunks_.size()) return mapped_blocks();
  synchronize(stream_);  // nothing queued may still read or write what goes
  while (chunks_.size() > keep) unmap_chunk();
  return mapped_blocks();
}

}  // namespace vt::cuda
