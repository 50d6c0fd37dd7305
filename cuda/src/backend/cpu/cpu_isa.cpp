// Run-time choice of the SIMD path; see cpu_isa.h.
#include "backend/cpu/cpu_isa.h"
#include "tuning.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vt::cpu {

const char *isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
  }
  return "?";
}

bool isa_from_name(const char *name, Isa *out) {
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (std::strcmp(name, isa_name(i)) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
#if defined(__x86_64__)
    // AVX2 path: 256-bit FMA plus F16C for fp16 weights. AVX-512 path: only AVX512F instructions are used.
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::Avx512: return __builtin_cpu_supports("avx512f") && isa_supported(Isa::Avx2);
#endif
#if defined(__aarch64__)
    case Isa::Neon: return true;  // Advanced SIMD is part of every armv8-a CPU
#endif
    default: return false;
  }
}

namespace {

Isa best() {
  for (Isa i : {Isa::Avx512, Isa::Avx2, Isa::Neon})
    if (isa_supported(i)) return i;
  return Isa::Scalar;
}

Isa from_env() {
  Isa b = best();
  const std::string env = cpu_isa_env();
  if (env.empty()) return b;
  const char *s = env.c_str();
  Isa want;
  if (!isa_from_name(s, &want)) {
    std::fprintf(stderr, "vtengine: VT_CPU_ISA=%s is not one of scalar|avx2|avx512|neon; using %s\n", s, isa_name(b));
    return b;
  }
  if (!isa_supported(want)) {
    std::fprintf(stderr, "vtengine: VT_CPU_ISA=%s is not supported by this CPU or build; using %s\n", s, isa_name(b));
    return b;
  }
  return want;
}

// 0xff = not chosen yet. Relaxed is enough: every thread computes the same answer from the same inputs.
std::atomic<uint8_t> g_isa{0xff};

}  // namespace

Isa isa_active() {
  uint8_t v = g_isa.load(std::memory_order_relaxed);
  if (v == 0xff) {
    v = uint8_t(from_env());
    g_isa.store(v, std::memory_order_relaxed);
  }
  return Isa(v);
}

bool set_isa(Isa isa) {
  if (!isa_supported(isa)) return false;
  g_isa.store(uint8_t(isa), std::memory_order_relaxed);
  return true;
}

}  // namespace vt::cpu
