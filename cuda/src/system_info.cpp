// vt_system_info_get (vt_engine.h): what this machine and this binary can run, gathered without a model from the
// CPU backend's detection and the CUDA backend's report (backend/cuda/cuda_system_info.cpp: the embedded kernels'
// headers, the driver probe, cuBLASLt's loader and the very check that decides device 'auto'), so the report cannot
// disagree with what a load does.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cuda/cuda_system_info.h"
#include "vt_engine.h"

namespace {

template <size_t N>
void put(char (&dst)[N], const std::string &s) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

void fill_cpu(vt_system_info &out) {
  std::string have, lack;
  for (const auto &[name, present] : vt::cpu::cpu_features()) {
    std::string &list = present ? have : lack;
    list += (list.empty() ? "" : " ") + name;
  }
  put(out.cpu_arch, vt::cpu::cpu_arch());
  put(out.cpu_features, have);
  put(out.cpu_features_absent, lack);
  put(out.cpu_matmul, vt::cpu::isa_name(vt::cpu::isa_active()));
  put(out.cpu_matmul_paths, vt::cpu::compiled_isa_paths());
  out.cpu_threads = int32_t(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

extern "C" vt_status vt_system_info_get(vt_system_info *out, char *err, size_t err_cap) {
  const auto report = [&](vt_status s, const char *msg) {
    if (err && err_cap) {
      std::strncpy(err, msg, err_cap - 1);
      err[err_cap - 1] = '\0';
    }
    return s;
  };
  if (!out) return report(VT_ERR_INVALID_OPTION, "vt_system_info_get: out is NULL");
  try {
    std::memset(out, 0, sizeof *out);
    fill_cpu(*out);
    vt::fill_cuda_system_info(*out);  // the kernels, the driver, the GPUs, cuBLASLt and what 'auto' picks
    return VT_OK;
  } catch (const std::bad_alloc &) {
    return report(VT_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception &e) {
    return report(VT_ERR_INTERNAL, e.what());
  } catch (...) {
    return report(VT_ERR_INTERNAL, "unknown internal error");
  }
}
