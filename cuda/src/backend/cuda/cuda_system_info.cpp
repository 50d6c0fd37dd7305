// The CUDA backend's part of vt_system_info_get (cuda/src/system_info.cpp): the embedded kernels, the driver and
// its GPUs, cuBLASLt, and what device 'auto' picks and why, from the very check a load makes (cuda_available).
#include "backend/cuda/cuda_system_info.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/cublaslt.h"
#include "backend/cuda/gemm_table.h"
#include "backend/cuda/device_probe.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/kernel_images.h"
#include "backend/cuda/kernel_targets.h"

namespace vt {

namespace {

template <size_t N>
void put(char (&dst)[N], const std::string &s) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

void fill_kernels(vt_system_info &out) {
  const auto &targets = cuda::embedded_kernel_targets();
  out.n_kernel_images = int32_t(cuda::kernel_image_count);
  out.n_cuda_targets = int32_t(std::min<size_t>(targets.size(), VT_SYSINFO_MAX_TARGETS));
  for (int i = 0; i < out.n_cuda_targets; ++i) put(out.cuda_targets[i], targets[i].name());
  put(out.kernels_problem, cuda::build_kernels_problem());
  out.min_driver_version = cuda::kMinDriverVersion;
}

// One GPU: the code the driver would pick, and the first reason it cannot run the engine, in the order a user
// would fix them (the driver, then the build).
void fill_gpu(vt_gpu_info &g, int ordinal, const cuda::ProbedGpu &p, int driver_version) {
  put(g.name, p.name);
  g.cc_major = p.cc / 10;
  g.cc_minor = p.cc % 10;
  g.total_bytes = p.total_bytes;
  g.integrated = p.integrated ? 1 : 0;
  const cuda::KernelCode code = cuda::kernel_code_for(p.cc, cuda::embedded_kernel_targets());
  g.code = code.kind == cuda::KernelCode::Cubin ? VT_GPU_CODE_CUBIN
         : code.kind == cuda::KernelCode::Ptx   ? VT_GPU_CODE_PTX
                                                    : VT_GPU_CODE_NONE;
  put(g.code_target, code.kind == cuda::KernelCode::None ? std::string() : code.target.name());
  std::string why;
  if (driver_version == 0)
    why = "the NVIDIA driver did not report its CUDA version (cuDriverGetVersion failed)";
  else if (driver_version < cuda::kMinDriverVersion)
    why = "the NVIDIA driver supports CUDA " + version_text(driver_version) + "; the embedded kernels need CUDA " +
          version_text(cuda::kMinDriverVersion) + " or newer (update the driver)";
  else
    why = cuda::kernel_code_problem(ordinal, p.name.c_str(), p.cc);
  g.usable = why.empty() ? 1 : 0;
  put(g.reason, why);
}

void fill_driver(vt_system_info &out) {
  const cuda::DriverProbe &d = cuda::probe_driver();
  out.driver_found = d.found ? 1 : 0;
  out.driver_version = d.version;
  put(out.driver_problem, d.problem);
  out.n_gpus = int32_t(d.gpus.size());
  for (size_t i = 0; i < d.gpus.size() && i < VT_SYSINFO_MAX_GPUS; ++i) fill_gpu(out.gpus[i], int(i), d.gpus[i], d.version);
}

void fill_libraries(vt_system_info &out) {
  const cuda::CublasLtLibrary lt = cuda::cublaslt_library();
  out.cublaslt_found = lt.found ? 1 : 0;
  out.cublaslt_version = lt.version;
  put(out.cublaslt_path, lt.path);
  put(out.cublaslt_problem, lt.reason);
}

// The GEMM table GPU 0 would use: its compute capability, and whether the sm_90a cubin (the wgmma kernels) is
// what the driver loads for it.
void fill_gemm(vt_system_info &out) {
  if (!out.cuda_usable || out.n_gpus < 1) return;
  const vt_gpu_info &g = out.gpus[0];
  const int cc = g.cc_major * 10 + g.cc_minor;
  const cuda::GemmTable &t = cuda::gemm_table(cc, g.code == VT_GPU_CODE_CUBIN && std::string(g.code_target) == "sm_90a");
  put(out.gemm_family, t.family);
  put(out.gemm_measured, t.measured);
  put(out.gemm_rules, cuda::gemm_rules_text(t));
}

void fill_auto(vt_system_info &out) {
  const cuda::Availability a = cuda::cuda_available();
  out.cuda_usable = a.ok ? 1 : 0;
  put(out.auto_device, a.ok ? "cuda" : "cpu");
  if (!a.ok) {
    // cuda_available() stops at the first thing missing and looks at the kernels first (no need for a driver if
    // nothing could run on it); a user fixes the machine first, so a missing driver or GPU is named first.
    const cuda::DriverProbe &d = cuda::probe_driver();
    const std::string kernels = cuda::build_kernels_problem();
    put(out.auto_reason, d.problem.empty() ? a.reason
                         : kernels.empty() ? d.problem
                                           : d.problem + "; and " + kernels);
  } else {
    const vt_gpu_info &g = out.gpus[0];
    put(out.auto_reason, std::string("GPU 0 (") + g.name + ") runs the embedded " +
                             (g.code == VT_GPU_CODE_PTX ? "PTX " : "cubin ") + g.code_target);
  }
}

}  // namespace

void fill_cuda_system_info(vt_system_info &out) {
  fill_kernels(out);
  fill_driver(out);
  fill_libraries(out);
  fill_auto(out);
  fill_gemm(out);
}

}  // namespace vt
