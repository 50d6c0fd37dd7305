// What the NVIDIA driver says about this machine, asked without the embedded kernels and without a context:
// whether libcuda.so.1 loads, its CUDA version, and each GPU's name, compute capability and memory. For
// vt_system_info, which must answer on a build without kernels too (where cuda_available() never opens the
// driver). Opens the library with its own small function table; never throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vt::cuda {

struct ProbedGpu {
  std::string name;
  int cc = 0;  // compute capability as major * 10 + minor
  int64_t total_bytes = 0;
  bool integrated = false;  // shares the host's memory (GB10, Jetson Thor)
};

struct DriverProbe {
  bool found = false;      // libcuda.so.1 loaded
  int version = 0;         // cuDriverGetVersion: 13000 for CUDA 13.0; 0 when unknown
  std::string problem;     // why the driver cannot list GPUs (not found, cuInit failed); empty when it can
  std::vector<ProbedGpu> gpus;
};

// Asked once per process, on first use (thread-safe), like cuda_available().
const DriverProbe &probe_driver() noexcept;

}  // namespace vt::cuda
