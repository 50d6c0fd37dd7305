// The CPU features the CPU backend's SIMD paths use or could use, as this process detects them, named as Linux
// names them in /proc/cpuinfo ("avx512_bf16", "asimdhp") so a user can compare the two. For vt_system_info;
// the dispatch itself is cpu_isa.h's.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace vt::cpu {

// Every feature checked, in a fixed order, with whether this CPU (and OS, for the AVX state) has it.
std::vector<std::pair<std::string, bool>> cpu_features();

// The machine this binary was built for: "x86_64", "aarch64".
const char *cpu_arch();

// The SIMD paths compiled into this binary, e.g. "scalar avx2 avx512".
const char *compiled_isa_paths();

}  // namespace vt::cpu
