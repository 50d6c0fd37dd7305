// vt_system_info → JS (contract in system_info.h). Space-separated lists become arrays; fixed-size fields are read
// with strnlen, as the C side terminates them but a fixed buffer is read as one either way.
#include "system_info.h"

#include <cstring>
#include <memory>
#include <string>

#include "errors.h"
#include "vt_engine.h"

namespace vtb {

namespace {

template <size_t N>
Napi::String str(Napi::Env env, const char (&s)[N]) {
  return Napi::String::New(env, s, strnlen(s, N));
}

template <size_t N>
Napi::Array words(Napi::Env env, const char (&s)[N]) {
  const std::string text(s, strnlen(s, N));
  Napi::Array a = Napi::Array::New(env);
  uint32_t n = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) a.Set(n++, Napi::String::New(env, text.substr(at, end - at)));
    at = end + 1;
  }
  return a;
}

Napi::Object gpu(Napi::Env env, const vt_gpu_info &g) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", str(env, g.name));
  o.Set("ccMajor", g.cc_major);
  o.Set("ccMinor", g.cc_minor);
  o.Set("totalBytes", double(g.total_bytes));
  o.Set("integrated", g.integrated != 0);
  o.Set("code", g.code == VT_GPU_CODE_CUBIN ? "cubin" : g.code == VT_GPU_CODE_PTX ? "ptx" : "none");
  o.Set("codeTarget", str(env, g.code_target));
  o.Set("usable", g.usable != 0);
  o.Set("reason", str(env, g.reason));
  return o;
}

}  // namespace

Napi::Value system_info(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto si = std::make_unique<vt_system_info>();  // ~14 KB: off the JS thread's stack
  char err[512] = "";
  if (vt_status st = vt_system_info_get(si.get(), err, sizeof err); st != VT_OK) throw status_error(env, st, err);
  Napi::Object o = Napi::Object::New(env);
  o.Set("cpuArch", str(env, si->cpu_arch));
  o.Set("cpuFeatures", words(env, si->cpu_features));
  o.Set("cpuFeaturesAbsent", words(env, si->cpu_features_absent));
  o.Set("cpuMatmul", str(env, si->cpu_matmul));
  o.Set("cpuMatmulPaths", words(env, si->cpu_matmul_paths));
  o.Set("cpuThreads", si->cpu_threads);
  o.Set("kernelImages", si->n_kernel_images);
  Napi::Array targets = Napi::Array::New(env);
  for (int32_t i = 0; i < si->n_cuda_targets && i < VT_SYSINFO_MAX_TARGETS; ++i) targets.Set(uint32_t(i), str(env, si->cuda_targets[i]));
  o.Set("cudaTargets", targets);
  o.Set("kernelsProblem", str(env, si->kernels_problem));
  o.Set("minDriverVersion", si->min_driver_version);
  o.Set("driverFound", si->driver_found != 0);
  o.Set("driverVersion", si->driver_version);
  o.Set("driverProblem", str(env, si->driver_problem));
  o.Set("gpuCount", si->n_gpus);
  Napi::Array gpus = Napi::Array::New(env);
  for (int32_t i = 0; i < si->n_gpus && i < VT_SYSINFO_MAX_GPUS; ++i) gpus.Set(uint32_t(i), gpu(env, si->gpus[i]));
  o.Set("gpus", gpus);
  o.Set("cublasLtFound", si->cublaslt_found != 0);
  o.Set("cublasLtVersion", double(si->cublaslt_version));
  o.Set("cublasLtPath", str(env, si->cublaslt_path));
  o.Set("cublasLtProblem", str(env, si->cublaslt_problem));
  o.Set("cudaUsable", si->cuda_usable != 0);
  o.Set("autoDevice", str(env, si->auto_device));
  o.Set("autoReason", str(env, si->auto_reason));
  o.Set("gemmFamily", str(env, si->gemm_family));
  o.Set("gemmMeasured", str(env, si->gemm_measured));
  o.Set("gemmRules", str(env, si->gemm_rules));
  return o;
}

}  // namespace vtb
