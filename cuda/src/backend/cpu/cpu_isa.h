// Internal to the CPU backend: which SIMD path the kernels take. Chosen once at run time from what the CPU
// reports (the engine is compiled for the plain x86-64 / armv8-a baseline, each SIMD path in functions of its
// own target), overridable with VT_CPU_ISA=scalar|avx2|avx512|neon for tests and comparisons.
#pragma once

#include <cstdint>

namespace vt::cpu {

enum class Isa : uint8_t { Scalar, Avx2, Avx512, Neon };

const char *isa_name(Isa isa);
bool isa_from_name(const char *name, Isa *out);

// Compiled into this binary and executable on this CPU.
bool isa_supported(Isa isa);

// The best supported path, unless VT_CPU_ISA (read once, on first use) or set_isa() says otherwise. An
// unsupported VT_CPU_ISA falls back to the best path with a warning on stderr rather than crashing on an
// illegal instruction.
Isa isa_active();

// Tests and benchmarks: force a path for the calls that follow (ignored, returning false, if unsupported).
bool set_isa(Isa isa);

}  // namespace vt::cpu
