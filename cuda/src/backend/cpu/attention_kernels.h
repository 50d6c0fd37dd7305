// Internal to the CPU backend: the per-ISA inner loops of attention.cpp. Keys and values of a chunk are
// reached through pointers because consecutive positions live in whatever cache blocks the block table names.
#pragma once

#include "backend/cpu/cpu_isa.h"

namespace vt::cpu {

struct AttentionKernels {
  // s[j] = q · k_j over head_dim, for j < n.
  void (*scores)(const float *q, const float *const *k, int n, int head_dim, float *s);
  // acc = acc * alpha + Σ_j p[j] · v_j, for j < n.
  void (*accumulate)(const float *p, const float *const *v, int n, int head_dim, float alpha, float *acc);
};

// The kernels of `isa`, which must be supported; the scalar ones for an ISA this build does not have.
const AttentionKernels &attention_kernels(Isa isa);

}  // namespace vt::cpu
