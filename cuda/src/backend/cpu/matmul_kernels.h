// Internal to the CPU backend: the per-ISA kernels behind matmul() and the driver that runs them.
//
// matmul.cpp owns the shape of the work (decode or prefill regime, thread split, scratch buffers); each ISA
// file supplies three kernels over raw pointers:
//
//  gemv  decode regime (few tokens, memory-bound). Rows [n0, n1) of w against all T tokens: each weight row
//        is streamed from memory once, widened in registers, and used for every token while it is there.
//        For bf16 weights x comes pre-permuted (see `perm` below).
//  pack  prefill regime (many tokens, compute-bound). Widens a strip of `nr` weight rows over k in [k0, k1)
//        into fp32, transposed so one k holds `nr` consecutive values: dst(k1 - k0, nr), rows past the end of
//        the matrix zero. Done once per strip and reused by every token tile, so the conversion is amortised.
//  tile  the register-blocked micro-kernel on a packed strip: y(mr, cols) (+)= x(mr, kc) · dst(kc, nr) with
//        mr <= MatmulKernels::mr tokens and cols <= nr valid outputs, accumulators held in registers for the
//        whole kc loop. `init` (nr floats, the bias tile or zeros) seeds the sums when !accumulate; otherwise
//        the sums start from y, so the driver can block over K.
//
// bf16 decode uses a permutation of x so that widening a bf16 vector is one shift (even elements) and one
// and (odd elements) instead of a shuffle: inside every chunk of `perm` elements of a row of x, the even
// elements come first, then the odd ones. The last K % perm elements stay in place.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/thread_pool.h"
#include "dtype.h"

namespace vt::cpu {

// The scalar reference path has no pack/tile (nullptr): it takes gemv for every T.
struct MatmulKernels {
  Isa isa;
  int nr;    // weight rows per packed strip (a multiple of the vector width, at most 64)
  int mr;    // tokens per micro-kernel call at most
  int perm;  // bf16 decode: chunk of the x permutation, in elements (0: x is used as is)

  // x(T, K) (permuted for bf16 when perm > 0), w(N, K) whole matrix, y(T, ldy); writes y[t][n0 .. n1).
  void (*gemv)(const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t n0, int64_t n1,
               const float *bias, float *y, int64_t ldy);
  // w points at the strip's first row (row stride K); rows <= nr of them exist.
  void (*pack)(const void *w, DType wt, int64_t K, int rows, int64_t k0, int64_t k1, float *dst);
  // x(mr, ldx) already offset to k0; dst(kc, nr); y(mr, ldy) already offset to the strip's first column.
  void (*tile)(const float *dst, const float *x, int64_t ldx, int64_t kc, int mr, const float *init,
               bool accumulate, float *y, int64_t ldy, int cols);
};

// nullptr when the ISA is not compiled into this build (another architecture).
const MatmulKernels *matmul_kernels_scalar();
const MatmulKernels *matmul_kernels_avx2();
const MatmulKernels *matmul_kernels_avx512();
const MatmulKernels *matmul_kernels_neon();

// The kernels of `isa`, which must be supported.
const MatmulKernels &matmul_kernels(Isa isa);

// matmul() on an explicit path; matmul() itself is matmul_with(matmul_kernels(isa_active()), ...).
void matmul_with(const MatmulKernels &k, ThreadPool &pool, const float *x, int64_t T, int64_t K, const void *w,
                 DType wt, int64_t N, const float *bias, float *y);

// Tests and benchmarks: the prefill regime's K block (0 = whole K), otherwise VT_CPU_KC or the default.
void matmul_set_k_block(int64_t kc);

// Largest T that takes the decode (gemv) regime; above it, the packed prefill regime.
constexpr int64_t kDecodeMaxTokens = 8;

// Helpers shared by the ISA files (scalar tails, bf16 x permutation).
inline float dot_tail(const float *x, const void *w, DType wt, int64_t k0, int64_t k1) {
  float s = 0.f;
  for (int64_t k = k0; k < k1; ++k) s += x[k] * load_as_f32(w, wt, k);
  return s;
}

// Widens rows [0, rows) of a strip over k in [k0, k1) into dst(k1 - k0, nr) with the scalar conversions;
// used as the pack of the paths that have no faster one.
void pack_strip_generic(const void *w, DType wt, int64_t K, int rows, int nr, int64_t k0, int64_t k1, float *dst);

}  // namespace vt::cpu
