// Asks libcuda.so.1 for its version and GPUs (contract in device_probe.h). The library, once opened, stays loaded:
// driver.cpp opens the same one, and unloading a CUDA driver under a live process is asking for trouble.
#include "backend/cuda/device_probe.h"

#include <dlfcn.h>

#include "backend/cuda/dl_symbols.h"
#include "backend/cuda/driver.h"

namespace vt::cuda {

namespace {

// Only what listing GPUs needs, so a driver too old for the engine still answers (the reason then says so).
struct ProbeFns {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice dev);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);  // _v2
};

std::string name_of(const ProbeFns &f, CUresult r) {
  const char *name = nullptr;
  if (f.cuGetErrorName) f.cuGetErrorName(r, &name);
  return name ? name : "CUDA error " + std::to_string(r);
}

DriverProbe probe() {
  DriverProbe p;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    p.problem = std::string("no NVIDIA driver: libcuda.so.1 could not be loaded (") + (e ? e : "unknown error") + ")";
    return p;
  }
  p.found = true;
  ProbeFns f{};
  std::string missing;
  resolve(lib, f.cuInit, "cuInit", nullptr, &missing);
  resolve(lib, f.cuDriverGetVersion, "cuDriverGetVersion", nullptr, &missing);
  resolve(lib, f.cuGetErrorName, "cuGetErrorName", nullptr, &missing);
  resolve(lib, f.cuDeviceGetCount, "cuDeviceGetCount", nullptr, &missing);
  resolve(lib, f.cuDeviceGet, "cuDeviceGet", nullptr, &missing);
  resolve(lib, f.cuDeviceGetName, "cuDeviceGetName", nullptr, &missing);
  resolve(lib, f.cuDeviceGetAttribute, "cuDeviceGetAttribute", nullptr, &missing);
  resolve(lib, f.cuDeviceTotalMem, "cuDeviceTotalMem_v2", nullptr, &missing);
  // The version needs no cuInit: a driver whose GPUs cannot be reached still says what it is.
  if (f.cuDriverGetVersion && f.cuDriverGetVersion(&p.version) != CUDA_SUCCESS) p.version = 0;
  if (!missing.empty()) {
    p.problem = "the NVIDIA driver is too old: libcuda.so.1 has no " + missing;
    return p;
  }
  if (CUresult r = f.cuInit(0); r != CUDA_SUCCESS) {
    p.problem = r == CUDA_ERROR_NO_DEVICE ? std::string("the NVIDIA driver sees no GPU (cuInit: CUDA_ERROR_NO_DEVICE)")
                                          : "cuInit failed: " + name_of(f, r);
    return p;
  }
  int n = 0;
  if (CUresult r = f.cuDeviceGetCount(&n); r != CUDA_SUCCESS) {
    p.problem = "cuDeviceGetCount failed: " + name_of(f, r);
    return p;
  }
  for (int i = 0; i < n; ++i) {
    ProbedGpu g;
    CUdevice dev = 0;
    char name[256] = "";
    int major = 0, minor = 0, integrated = 0;
    size_t total = 0;
    // A GPU that does not answer is still listed (as "?"), so the count stays the driver's.
    if (f.cuDeviceGet(&dev, i) == CUDA_SUCCESS) {
      if (f.cuDeviceGetName(name, int(sizeof name) - 1, dev) == CUDA_SUCCESS) g.name = name;
      f.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
      f.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
      f.cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev);
      if (f.cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS) g.total_bytes = int64_t(total);
    }
    if (g.name.empty()) g.name = "?";
    g.cc = major * 10 + minor;
    g.integrated = integrated != 0;
    p.gpus.push_back(std::move(g));
  }
  if (n == 0) p.problem = "the NVIDIA driver sees no GPU";
  return p;
}

}  // namespace

const DriverProbe &probe_driver() noexcept {
  static const DriverProbe p = [] {
    try {
      return probe();
    } catch (...) {  // bad_alloc only
      DriverProbe none;
      none.problem = "asking the NVIDIA driver failed (out of memory)";
      return none;
    }
  }();
  return p;
}

}  // namespace vt::cuda
