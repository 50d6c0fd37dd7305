#include "backend/cuda/staged_upload.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "backend/cpu/thread_pool.h"

namespace vt::cuda {

namespace {

// Threads that copy a slot: reading the page cache through the mapping is page-fault and memcpy bound on one
// thread (~5 GB/s); a few in parallel keep up with the PCIe copy.
int copy_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return int(std::clamp<unsigned>(hw ? hw : 1, 1, 8));
}

}  // namespace

StagedUpload::StagedUpload(CUstream stream)
    : stream_(stream), pinned_(kSlotBytes * kSlots), pool_(std::make_unique<cpu::ThreadPool>(copy_threads())) {
  for (int i = 0; i < kSlots; ++i) done_.push_back(std::make_unique<Event>());
}

StagedUpload::~StagedUpload() {
  try {
    finish();
  } catch (...) {
    // (a failed synchronize has already failed the load; nothing to add here)
  }
}

void StagedUpload::copy(CUdeviceptr dst, const void *src, size_t bytes) {
  const auto *from = static_cast<const uint8_t *>(src);
  for (size_t off = 0; off < bytes;) {
    const size_t n = std::min(kSlotBytes, bytes - off);
    const int slot = next_;
    next_ = (next_ + 1) % kSlots;
    done_[size_t(slot)]->synchronize();  // the slot's previous device copy has read it
    uint8_t *staging = pinned_.as<uint8_t>() + size_t(slot) * kSlotBytes;
    const uint8_t *piece = from + off;
    pool_->run(int64_t(n), int64_t(1) << 20, [&](int64_t b, int64_t e, int) {
      std::memcpy(staging + b, piece + b, size_t(e - b));
    });
    check(driver().cuMemcpyHtoDAsync(dst + off, staging, n, stream_), "cuMemcpyHtoDAsync(weights)");
    done_[size_t(slot)]->record(stream_);
    off += n;
  }
}

void StagedUpload::finish() {
  for (auto &e : done_) e->synchronize();
}

}  // namespace vt::cuda
