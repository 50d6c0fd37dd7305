// Loads libcuda.so.1 once per process and answers whether CUDA is usable here (contract in driver.h).
// The library stays loaded for the life of the process: contexts and modules hold pointers into it.
#include "backend/cuda/driver.h"

#include <dlfcn.h>

#include "backend/cuda/dl_symbols.h"
#include "backend/cuda/kernel_targets.h"
#include "status.h"

namespace vt::cuda {

namespace {

struct Loaded {
  Driver d{};
  Availability a;
};

std::string error_text(const Driver &d, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(r);
  if (text) s += std::string(": ") + text;
  return s;
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

Loaded load() {
  Loaded L;
  Availability &a = L.a;
  if (std::string why = build_kernels_problem(); !why.empty()) {  // no driver needed to know nothing could run
    a.reason = why;
    return L;
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    a.reason = std::string("no NVIDIA driver: libcuda.so.1 could not be loaded (") + (e ? e : "unknown error") + ")";
    return L;
  }
  Driver &d = L.d;
  std::string missing;
  resolve(lib, d.cuInit, "cuInit", nullptr, &missing);
  resolve(lib, d.cuDriverGetVersion, "cuDriverGetVersion", nullptr, &missing);
  resolve(lib, d.cuGetErrorString, "cuGetErrorString", nullptr, &missing);
  resolve(lib, d.cuGetErrorName, "cuGetErrorName", nullptr, &missing);
  resolve(lib, d.cuDeviceGetCount, "cuDeviceGetCount", nullptr, &missing);
  resolve(lib, d.cuDeviceGet, "cuDeviceGet", nullptr, &missing);
  resolve(lib, d.cuDeviceGetName, "cuDeviceGetName", nullptr, &missing);
  resolve(lib, d.cuDeviceGetAttribute, "cuDeviceGetAttribute", nullptr, &missing);
  resolve(lib, d.cuDeviceTotalMem, "cuDeviceTotalMem_v2", nullptr, &missing);
  resolve(lib, d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", nullptr, &missing);
  resolve(lib, d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", nullptr, &missing);
  resolve(lib, d.cuCtxSetCurrent, "cuCtxSetCurrent", nullptr, &missing);
  resolve(lib, d.cuCtxGetCurrent, "cuCtxGetCurrent", nullptr, &missing);
  resolve(lib, d.cuCtxSynchronize, "cuCtxSynchronize", nullptr, &missing);
  resolve(lib, d.cuModuleLoadData, "cuModuleLoadData", nullptr, &missing);
  resolve(lib, d.cuModuleUnload, "cuModuleUnload", nullptr, &missing);
  resolve(lib, d.cuModuleGetFunction, "cuModuleGetFunction", nullptr, &missing);
  resolve(lib, d.cuFuncSetAttribute, "cuFuncSetAttribute", nullptr, &missing);
  resolve(lib, d.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", nullptr,
          &missing);
  resolve(lib, d.cuMemGetInfo, "cuMemGetInfo_v2", nullptr, &missing);
  resolve(lib, d.cuMemAlloc, "cuMemAlloc_v2", nullptr, &missing);
  resolve(lib, d.cuMemFree, "cuMemFree_v2", nullptr, &missing);
  resolve(lib, d.cuMemcpyHtoD, "cuMemcpyHtoD_v2", nullptr, &missing);
  resolve(lib, d.cuMemcpyDtoH, "cuMemcpyDtoH_v2", nullptr, &missing);
  resolve(lib, d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", nullptr, &missing);
  resolve(lib, d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", nullptr, &missing);
  resolve(lib, d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", nullptr, &missing);
  resolve(lib, d.cuMemsetD8Async, "cuMemsetD8Async", nullptr, &missing);
  resolve(lib, d.cuStreamCreate, "cuStreamCreate", nullptr, &missing);
  resolve(lib, d.cuStreamDestroy, "cuStreamDestroy_v2", nullptr, &missing);
  resolve(lib, d.cuStreamSynchronize, "cuStreamSynchronize", nullptr, &missing);
  resolve(lib, d.cuEventCreate, "cuEventCreate", nullptr, &missing);
  resolve(lib, d.cuEventDestroy, "cuEventDestroy_v2", nullptr, &missing);
  resolve(lib, d.cuEventRecord, "cuEventRecord", nullptr, &missing);
  resolve(lib, d.cuEventSynchronize, "cuEventSynchronize", nullptr, &missing);
  resolve(lib, d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", &missing);
  resolve(lib, d.cuLaunchKernel, "cuLaunchKernel", nullptr, &missing);
  resolve(lib, d.cuLaunchKernelEx, "cuLaunchKernelEx", nullptr, &missing);
  resolve(lib, d.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters", nullptr, &missing);
  resolve(lib, d.cuStreamBeginCapture, "cuStreamBeginCapture_v2", nullptr, &missing);
  resolve(lib, d.cuStreamEndCapture, "cuStreamEndCapture", nullptr, &missing);
  resolve(lib, d.cuGraphInstantiate, "cuGraphInstantiateWithFlags", nullptr, &missing);
  resolve(lib, d.cuGraphLaunch, "cuGraphLaunch", nullptr, &missing);
  resolve(lib, d.cuGraphExecUpdate, "cuGraphExecUpdate_v2", nullptr, &missing);
  resolve(lib, d.cuGraphExecDestroy, "cuGraphExecDestroy", nullptr, &missing);
  resolve(lib, d.cuGraphDestroy, "cuGraphDestroy", nullptr, &missing);
  resolve(lib, d.cuGraphGetNodes, "cuGraphGetNodes", nullptr, &missing);
  resolve(lib, d.cuMemHostAlloc, "cuMemHostAlloc", nullptr, &missing);
  resolve(lib, d.cuMemFreeHost, "cuMemFreeHost", nullptr, &missing);
  resolve(lib, d.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", nullptr, &missing);
  resolve(lib, d.cuMemAddressReserve, "cuMemAddressReserve", nullptr, &missing);
  resolve(lib, d.cuMemAddressFree, "cuMemAddressFree", nullptr, &missing);
  resolve(lib, d.cuMemCreate, "cuMemCreate", nullptr, &missing);
  resolve(lib, d.cuMemRelease, "cuMemRelease", nullptr, &missing);
  resolve(lib, d.cuMemMap, "cuMemMap", nullptr, &missing);
  resolve(lib, d.cuMemUnmap, "cuMemUnmap", nullptr, &missing);
  resolve(lib, d.cuMemSetAccess, "cuMemSetAccess", nullptr, &missing);
  resolve(lib, d.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", nullptr, &missing);
  resolve(lib, d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", nullptr, &missing);
  if (!missing.empty()) {
    a.reason = "the NVIDIA driver is too old: libcuda.so.1 has no " + missing + " (CUDA " +
               version_text(kMinDriverVersion) + " or newer is needed)";
    return L;
  }
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    a.reason = r == CUDA_ERROR_NO_DEVICE ? std::string("no CUDA device found (cuInit: no device)")
             : r == CUDA_ERROR_INSUFFICIENT_DRIVER
                 ? "the NVIDIA driver is too old for this libcuda (cuInit: insufficient driver)"
                 : "cuInit failed: " + error_text(d, r);
    return L;
  }
  if ((r = d.cuDriverGetVersion(&a.driver_version)) != CUDA_SUCCESS) {
    a.reason = "cuDriverGetVersion failed: " + error_text(d, r);
    return L;
  }
  if (a.driver_version < kMinDriverVersion) {
    a.reason = "the NVIDIA driver supports CUDA " + version_text(a.driver_version) + "; these kernels need CUDA " +
               version_text(kMinDriverVersion) + " or newer (update the driver)";
    return L;
  }
  if ((r = d.cuDeviceGetCount(&a.device_count)) != CUDA_SUCCESS || a.device_count == 0) {
    a.reason = r != CUDA_SUCCESS ? "cuDeviceGetCount failed: " + error_text(d, r) : std::string("no CUDA device found");
    return L;
  }
  CUdevice dev = 0;
  int major = 0, minor = 0;
  char name[256] = "?";
  if ((r = d.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (r = d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) != CUDA_SUCCESS ||
      (r = d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) != CUDA_SUCCESS ||
      (r = d.cuDeviceGetName(name, int(sizeof name), dev)) != CUDA_SUCCESS) {
    a.reason = "querying CUDA device 0 failed: " + error_text(d, r);
    return L;
  }
  // Too old a GPU, or one this build has neither a cubin nor PTX for: refused here, so device 'auto' takes the
  // CPU instead of failing later in cuModuleLoadData with CUDA_ERROR_NO_BINARY_FOR_GPU.
  if (std::string why = kernel_code_problem(0, name, major * 10 + minor); !why.empty()) {
    a.reason = why;
    return L;
  }
  a.ok = true;
  return L;
}

// Loaded once, on first use, thread-safe (function-local static).
const Loaded &loaded() noexcept {
  static const Loaded L = [] {
    try {
      return load();
    } catch (...) {  // only bad_alloc can get here; report it rather than terminate
      Loaded none;
      none.a.reason = "checking for CUDA failed (out of memory)";
      return none;
    }
  }();
  return L;
}

}  // namespace

Availability cuda_available() noexcept {
  try {
    return loaded().a;
  } catch (...) {
    return Availability{false, "checking for CUDA failed", 0, 0};
  }
}

const Driver &driver() {
  const Loaded &L = loaded();
  if (!L.a.ok) fail(VT_ERR_NO_GPU, "CUDA is not available: " + L.a.reason);
  return L.d;
}

std::string error_text(CUresult r) { return error_text(loaded().d, r); }

int64_t device_total_bytes(int ordinal) {
  const Driver &d = driver();
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  size_t total = 0;
  check(d.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
  return int64_t(total);
}

int device_sm_count(int ordinal) {
  const Driver &d = driver();
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  int n = 0;
  check(d.cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute(SM count)");
  return n;
}

void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const vt_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? VT_ERR_OUT_OF_MEMORY
                     : (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
                        r == CUDA_ERROR_INSUFFICIENT_DRIVER || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
                         ? VT_ERR_NO_GPU
                         : VT_ERR_INTERNAL;
  fail(st, std::string(what) + ": " + error_text(r));
}

void check(CUresult r, const std::string &what) { check(r, what.c_str()); }

}  // namespace vt::cuda
