#include "backend/cuda/context.h"

#include <cstdlib>

#include "backend/cuda/kernel_images.h"
#include "status.h"

namespace vt::cuda {

Context::Context(int ordinal, bool pdl) : ordinal_(ordinal) {
  const Driver &d = driver();  // throws VT_ERR_NO_GPU with the reason when CUDA is not usable
  check(d.cuDeviceGet(&dev_, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  char name[256] = {};
  int major = 0, minor = 0, l2 = 0, integrated = 0;
  size_t total = 0;
  check(d.cuDeviceGetName(name, int(sizeof name) - 1, dev_), "cuDeviceGetName");
  check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev_), "cuDeviceGetAttribute");
  check(d.cuDeviceTotalMem(&total, dev_), "cuDeviceTotalMem");
  name_ = name;
  cc_ = major * 10 + minor;
  pdl_ = cc_ >= 90 && pdl;
  l2_bytes_ = l2;
  total_bytes_ = int64_t(total);
  integrated_ = integrated != 0;

  check(d.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  try {
    check(d.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    for (size_t i = 0; i < kernel_image_count; ++i) {
      const KernelImage &img = kernel_images[i];
      CUmodule mod = nullptr;
      const CUresult r = d.cuModuleLoadData(&mod, img.data);
      if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        fail(VT_ERR_NO_GPU, name_ + " (compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                                ") cannot run this build's '" + img.name + "' kernels: " + error_text(r));
      check(r, std::string("cuModuleLoadData(") + img.name + ")");
      modules_.emplace_back(img.name, mod);
    }
  } catch (...) {
    for (auto &m : modules_) d.cuModuleUnload(m.second);
    d.cuDevicePrimaryCtxRelease(dev_);
    throw;
  }
}

Context::~Context() {
  const Driver &d = driver();  // cannot throw here: constructed only when CUDA was available
  for (auto &m : modules_) d.cuModuleUnload(m.second);
  d.cuDevicePrimaryCtxRelease(dev_);
}

void Context::make_current() const { check(driver().cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

void Context::synchronize() const { check(driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

CUfunction Context::find_function(const std::string &name) {
  if (auto it = functions_.find(name); it != functions_.end()) return it->second;
  for (auto &m : modules_) {
    CUfunction f = nullptr;
    const CUresult r = driver().cuModuleGetFunction(&f, m.second, name.c_str());
    if (r == CUDA_SUCCESS) return functions_[name] = f;
    if (r != CUDA_ERROR_NOT_FOUND) check(r, "cuModuleGetFunction(" + name + ")");
  }
  return nullptr;
}

CUfunction Context::function(const std::string &name) {
  if (CUfunction f = find_function(name)) return f;
  fail(VT_ERR_INTERNAL, "CUDA kernel '" + name + "' is not in this build's kernel images (rebuild them with "
                        "scripts/build-cuda.mjs)");
}

int64_t Context::free_bytes() const {
  size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return int64_t(free);
}

Context::MemInfo Context::mem_info() const noexcept {
  MemInfo m;
  try {
    const Driver &d = driver();
    CUcontext prev = nullptr;
    if (d.cuCtxGetCurrent(&prev) != CUDA_SUCCESS) return m;
    if (prev != ctx_ && d.cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) return m;
    size_t free = 0, total = 0;
    if (d.cuMemGetInfo(&free, &total) == CUDA_SUCCESS) m = {int64_t(free), int64_t(total)};
    if (prev != ctx_) d.cuCtxSetCurrent(prev);
  } catch (...) {
    // driver() throws only when CUDA is not usable, which a constructed Context rules out
  }
  return m;
}

// --- DeviceBuffer ---------------------------------------------------------------------------------------------
DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) check(driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
  if (this != &o) {
    if (ptr_) driver().cuMemFree(ptr_);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(CUstream stream, const void *src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) fail(VT_ERR_INTERNAL, "DeviceBuffer::upload past the end");
  if (!bytes) return;
  check(driver().cuMemcpyHtoDAsync(ptr_ + offset, src, bytes, stream), "cuMemcpyHtoDAsync");
  synchronize(stream);
}

void DeviceBuffer::download(CUstream stream, void *dst, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) fail(VT_ERR_INTERNAL, "DeviceBuffer::download past the end");
  if (!bytes) return;
  check(driver().cuMemcpyDtoHAsync(dst, ptr_ + offset, bytes, stream), "cuMemcpyDtoHAsync");
  synchronize(stream);
}

void DeviceBuffer::fill_bytes(CUstream stream, unsigned char value) {
  if (!bytes_) return;
  check(driver().cuMemsetD8Async(ptr_, value, bytes_, stream), "cuMemsetD8Async");
  synchronize(stream);
}

// --- PinnedBuffer ---------------------------------------------------------------------------------------------
PinnedBuffer::PinnedBuffer(size_t bytes, bool mapped) : bytes_(bytes) {
  if (!bytes) return;
  const unsigned flags = CU_MEMHOSTALLOC_PORTABLE | (mapped ? CU_MEMHOSTALLOC_DEVICEMAP : 0u);
  check(driver().cuMemHostAlloc(&p_, bytes, flags), "cuMemHostAlloc(" + std::to_string(bytes) + " bytes)");
  if (mapped) {
    const CUresult r = driver().cuMemHostGetDevicePointer(&dptr_, p_, 0);
    if (r != CUDA_SUCCESS) driver().cuMemFreeHost(std::exchange(p_, nullptr));  // (the destructor will not run)
    check(r, "cuMemHostGetDevicePointer");
  }
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) driver().cuMemFreeHost(p_);
}
PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&o) noexcept {
  if (this != &o) {
    if (p_) driver().cuMemFreeHost(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    dptr_ = std::exchange(o.dptr_, 0);
  }
  return *this;
}

// --- Stream, Event --------------------------------------------------------------------------------------------
Stream::Stream() { check(driver().cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }
Stream::~Stream() {
  if (s_) driver().cuStreamDestroy(s_);
}
void synchronize(CUstream s) { check(driver().cuStreamSynchronize(s), "cuStreamSynchronize"); }
void Stream::synchronize() const { cuda::synchronize(s_); }

Event::Event() { check(driver().cuEventCreate(&e_, CU_EVENT_DEFAULT), "cuEventCreate"); }
Event::~Event() {
  if (e_) driver().cuEventDestroy(e_);
}
void Event::record(CUstream s) { check(driver().cuEventRecord(e_, s), "cuEventRecord"); }
void Event::synchronize() const { check(driver().cuEventSynchronize(e_), "cuEventSynchronize"); }
float Event::elapsed_ms(const Event &start, const Event &end) {
  end.synchronize();
  float ms = 0.f;
  check(driver().cuEventElapsedTime(&ms, start.e_, end.e_), "cuEventElapsedTime");
  return ms;
}

}  // namespace vt::cuda
