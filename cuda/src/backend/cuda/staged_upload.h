// Host-to-device copies of the weights at load, through pinned staging buffers.
//
// Why: a cuMemcpyHtoDAsync from pageable memory (the checkpoint's mapping) is staged by the driver itself, one
// piece at a time on the calling thread, and measured 5.1 GB/s on the H200 machine: 232 of the Qwen3-0.6B
// shape's 307 ms from vt_engine_load to ready (bench/RESULTS.md, session 5). Here several threads copy (and so
// fault in) the mapped pages into one of a few pinned slots while the DMA engine copies the slots filled
// before to the device, so reading the page cache and the PCIe transfer overlap.
//
// The slots exist only while a StagedUpload does (a load): no host copy of the weights stays behind, and each
// source range may be given back (Checkpoint release) as soon as copy() returns, since the bytes are in a slot.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/cuda/context.h"

namespace vt::cpu {
class ThreadPool;
}

namespace vt::cuda {

class StagedUpload {
 public:
  // kSlots slots of kSlotBytes each (64 MiB of pinned host memory while it lives); the copies go on `stream`.
  static constexpr size_t kSlotBytes = size_t(16) << 20;
  static constexpr int kSlots = 4;
  explicit StagedUpload(CUstream stream);
  ~StagedUpload();  // waits for the copies in flight (their slots are freed with it)
  StagedUpload(const StagedUpload &) = delete;
  StagedUpload &operator=(const StagedUpload &) = delete;

  // Copies `bytes` from host `src` to device `dst`. Returns once `src` has been read; the device side may still
  // be in flight on the stream (kernels queued after it on the stream see it; finish() waits for it).
  void copy(CUdeviceptr dst, const void *src, size_t bytes);
  void finish();

 private:
  CUstream stream_;
  PinnedBuffer pinned_;
  std::vector<std::unique_ptr<Event>> done_;  // per slot: its last device copy has read it
  int next_ = 0;
  std::unique_ptr<cpu::ThreadPool> pool_;
};

}  // namespace vt::cuda
