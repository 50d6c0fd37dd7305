// One GPU as the CUDA backend sees it: the device's primary context, the embedded kernel modules, kernel
// lookup by name and launch; plus owners for device memory, streams and events. Every driver call's result
// is checked and a failure becomes a vt::Error (driver.h's check()).
//
// Threads: the Context makes its primary context current on the thread that creates it; another thread must
// call make_current() before using it. Lifetimes: buffers, streams and events must be destroyed before the
// Context that they were created under (declare them after it).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/driver.h"

namespace vt::cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class Context {
 public:
  // Retains device `ordinal`'s primary context, makes it current and loads every embedded kernel image.
  // Throws vt::Error(VT_ERR_NO_GPU) when CUDA is not available or the GPU has no code in this build.
  // pdl: launch with programmatic dependent launch where the GPU has it (CudaTuning::pdl; tests turn it off).
  explicit Context(int ordinal = 0, bool pdl = true);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  void make_current() const;
  // Waits for all work on the device (cuCtxSynchronize). Not for engine code: every engine in the process shares
  // the primary context, and a wait across it invalidates another engine's graph capture. Wait for a stream.
  void synchronize() const;

  // The kernel `name` (an extern "C" entry point of some .cu file). Throws if no module has it.
  CUfunction function(const std::string &name);
  // The same, or null when no module has it (kernels that only some builds carry, such as the experiments').
  CUfunction find_function(const std::string &name);

  // Launches f with the given arguments, which must match the kernel's parameters exactly in type and
  // order. Launch errors throw; errors of the running kernel surface at the next synchronizing call.
  template <class... Args>
  void launch(CUfunction f, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, const Args &...args) const {
    void *params[] = {const_cast<void *>(static_cast<const void *>(&args))..., nullptr};
    check(driver().cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, params,
                                  nullptr),
          "cuLaunchKernel");
  }

  // launch() with programmatic dependent launch (Hopper and newer, unless the constructor said no): the kernel may
  // start while the previous kernel on the stream is still running, so it MUST execute griddepcontrol.wait
  // (pdl_wait() in common.cuh) before reading anything an earlier kernel wrote or writing anything one reads.
  // What it does before that (prefetching weights) overlaps the previous kernel's tail.
  template <class... Args>
  void launch_pdl(CUfunction f, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, const Args &...args) const {
    if (!pdl_) return launch(f, grid, block, shared_bytes, stream, args...);
    void *params[] = {const_cast<void *>(static_cast<const void *>(&args))..., nullptr};
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    const CUlaunchConfig cfg{grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, &attr, 1};
    check(driver().cuLaunchKernelEx(&cfg, f, params, nullptr), "cuLaunchKernelEx");
  }
  // launch() in thread-block clusters of (cluster_x, 1, 1) blocks (sm_90+; grid.x a multiple of cluster_x), the
  // cluster's shape given at launch rather than compiled into the kernel; with `pdl`, as launch_pdl (same rule).
  template <class... Args>
  void launch_cluster(CUfunction f, Dim3 grid, unsigned cluster_x, Dim3 block, unsigned shared_bytes, CUstream stream,
                      bool pdl, const Args &...args) const {
    void *params[] = {const_cast<void *>(static_cast<const void *>(&args))..., nullptr};
    CUlaunchAttribute attr[2]{};
    attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr[0].value.clusterDim = {cluster_x, 1, 1};
    attr[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[1].value.programmaticStreamSerializationAllowed = 1;
    const CUlaunchConfig cfg{grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, attr,
                             pdl && pdl_ ? 2u : 1u};
    check(driver().cuLaunchKernelEx(&cfg, f, params, nullptr), "cuLaunchKernelEx(cluster)");
  }
  bool pdl() const { return pdl_; }

  const std::string &name() const { return name_; }
  int compute_capability() const { return cc_; }  // e.g. 90
  int sm_count() const { return sm_count_; }
  int64_t l2_bytes() const { return l2_bytes_; }
  int64_t total_bytes() const { return total_bytes_; }
  int64_t free_bytes() const;  // cuMemGetInfo, with this context current on the calling thread
  int ordinal() const { return ordinal_; }
  CUdevice device() const { return dev_; }
  // The device is integrated: its memory is the host's (GB10, Jetson Thor), so device bytes are host bytes too.
  bool integrated() const { return integrated_; }

  // The device's memory now (cuMemGetInfo) from any thread, as the JS thread asks while the step thread runs:
  // the context is made current for the call, then what was current on that thread before is put back (so a
  // disposed engine's context is never left current on a thread that outlives it). Never throws, since memory
  // reports must not: {-1, -1} when the driver does not answer (a failed kernel can leave the context unusable).
  struct MemInfo {
    int64_t free_bytes = -1, total_bytes = -1;
  };
  MemInfo mem_info() const noexcept;

 private:
  int ordinal_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::vector<std::pair<std::string, CUmodule>> modules_;  // (family, module)
  std::unordered_map<std::string, CUfunction> functions_;
  std::string name_;
  int cc_ = 0, sm_count_ = 0;
  bool pdl_ = false;  // programmatic dependent launch: compute capability >= 9.0, unless the constructor said no
  bool integrated_ = false;
  int64_t l2_bytes_ = 0, total_bytes_ = 0;
};

// Device memory, owned. upload, download and fill_bytes are for setup and tests: each is enqueued on `stream`
// and waits for it, so it is ordered after the work already on that stream and complete on return. Pass the
// stream the kernels run on (the legacy default stream, nullptr, is not ordered with a non-blocking Stream).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer &&o) noexcept : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(CUstream stream, const void *src, size_t bytes, size_t offset = 0);
  void download(CUstream stream, void *dst, size_t bytes, size_t offset = 0) const;
  void fill_bytes(CUstream stream, unsigned char value);  // 0xff: NaN in fp32 and bf16 (poison)

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// Page-locked host memory (cuMemHostAlloc): what async copies need to be truly asynchronous, and the staging
// area of each step's metadata. Owned; freed with cuMemFreeHost. `mapped`: kernels may also read and write it
// (at device_ptr(), over the bus), as the captured greedy step writes its picks straight to the host.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes, bool mapped = false);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer &&o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), dptr_(std::exchange(o.dptr_, 0)) {}
  PinnedBuffer &operator=(PinnedBuffer &&o) noexcept;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  template <class T>
  T *as() const { return static_cast<T *>(p_); }
  size_t bytes() const { return bytes_; }
  CUdeviceptr device_ptr() const { return dptr_; }  // 0 unless mapped

 private:
  void *p_ = nullptr;
  size_t bytes_ = 0;
  CUdeviceptr dptr_ = 0;
};

// Waits for the work queued on one stream. Engine code waits on its stream, never on the context: another engine in
// the process shares the primary context, and a context-wide synchronize while its stream is capturing a graph
// invalidates that capture (its step then fails).
void synchronize(CUstream s);

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  CUstream get() const { return s_; }
  void synchronize() const;

 private:
  CUstream s_ = nullptr;
};

// Timing events (CU_EVENT_DEFAULT).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  void record(CUstream s);
  void synchronize() const;
  // Milliseconds from `start` to `end`, both recorded and `end` complete (synchronizes on it).
  static float elapsed_ms(const Event &start, const Event &end);

 private:
  CUevent e_ = nullptr;
};

}  // namespace vt::cuda
