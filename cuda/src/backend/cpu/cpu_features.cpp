// Detects the CPU's features (contract in cpu_features.h). On x86 with the same __builtin_cpu_supports the
// dispatch uses, which also requires the OS to save the AVX / AVX-512 registers; on arm64 with the kernel's hwcaps.
#include "backend/cpu/cpu_features.h"

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace vt::cpu {

std::vector<std::pair<std::string, bool>> cpu_features() {
#if defined(__x86_64__)
  // {/proc/cpuinfo name, __builtin_cpu_supports name}: the builtin needs a literal, hence the macro.
#define VT_FEATURE(proc, gcc) {proc, __builtin_cpu_supports(gcc) != 0}
  return {
      VT_FEATURE("sse4_2", "sse4.2"),          VT_FEATURE("avx", "avx"),
      VT_FEATURE("avx2", "avx2"),              VT_FEATURE("fma", "fma"),
      VT_FEATURE("f16c", "f16c"),              VT_FEATURE("avx512f", "avx512f"),
      VT_FEATURE("avx512bw", "avx512bw"),      VT_FEATURE("avx512vl", "avx512vl"),
      VT_FEATURE("avx512_vnni", "avx512vnni"), VT_FEATURE("avx512_bf16", "avx512bf16"),
      VT_FEATURE("avx512_fp16", "avx512fp16"), VT_FEATURE("avx_vnni", "avxvnni"),
  };
#undef VT_FEATURE
#elif defined(__aarch64__)
  // Bits of AT_HWCAP / AT_HWCAP2 as in Linux's arch/arm64/include/uapi/asm/hwcap.h (written out, so the build
  // does not depend on how new the cross toolchain's kernel headers are).
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  return {
      {"fp", (hw & (1ul << 0)) != 0},      {"asimd", (hw & (1ul << 1)) != 0},    {"fphp", (hw & (1ul << 9)) != 0},
      {"asimdhp", (hw & (1ul << 10)) != 0}, {"asimddp", (hw & (1ul << 20)) != 0}, {"sve", (hw & (1ul << 22)) != 0},
      {"sve2", (hw2 & (1ul << 1)) != 0},    {"i8mm", (hw2 & (1ul << 13)) != 0},   {"bf16", (hw2 & (1ul << 14)) != 0},
  };
#else
  return {};
#endif
}

const char *cpu_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "other";
#endif
}

const char *compiled_isa_paths() {
#if defined(__x86_64__)
  return "scalar avx2 avx512";
#elif defined(__aarch64__)
  return "scalar neon";
#else
  return "scalar";
#endif
}

}  // namespace vt::cpu
