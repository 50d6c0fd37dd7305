// y(T, N) = x(T, K) · w(N, K)ᵀ (+ bias): the regime split, the thread split and the scalar reference path.
// The SIMD kernels live in matmul_avx2.cpp, matmul_avx512.cpp and matmul_neon.cpp (see matmul_kernels.h).
//
// Decode (T <= kDecodeMaxTokens) is memory-bound: the weights are read once per call, so the only goal is to
// stream them at the machine's bandwidth; threads split N into contiguous row ranges.
// Prefill is compute-bound: threads split N into strips of `nr` rows; each strip is widened to fp32 once (per
// K block, see k_block) into a thread-local buffer and swept by every token tile of the micro-kernel.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/scratch.h"
#include "tuning.h"

namespace vt::cpu {

namespace {

// K block of the prefill regime. Measured on a 2-core Xeon (AVX-512 and AVX2, K = 1024): blocks of 256 or
// 512 were 10-30% slower than sweeping the whole K per strip, so a strip is only split when it would outgrow
// L2 (nr × 4096 fp32 = 512 KiB at nr = 32). Overridable for tuning: VT_CPU_KC (0 = never split).
std::atomic<int64_t> g_k_block{-1};  // -1: not read from the environment yet

int64_t k_block() {
  int64_t kc = g_k_block.load(std::memory_order_relaxed);
  if (kc < 0) {
    const int env = cpu_kc_env();  // VT_CPU_KC; -1 when unset
    kc = env >= 0 ? int64_t(env) : int64_t(4096);
    g_k_block.store(kc, std::memory_order_relaxed);
  }
  return kc;
}

template <DType WT>
void pack_strip_t(const void *w, int64_t K, int rows, int nr, int64_t k0, int64_t k1, float *dst) {
  for (int r = 0; r < nr; ++r) {
    float *d = dst + r;
    if (r >= rows) {
      for (int64_t k = k0; k < k1; ++k, d += nr) *d = 0.f;
      continue;
    }
    int64_t base = int64_t(r) * K;
    for (int64_t k = k0; k < k1; ++k, d += nr) *d = load_as_f32(w, WT, base + k);
  }
}

// ---- scalar reference path: plain C++, one weight row widened at a time, four partial sums per dot ----

thread_local Scratch t_row;  // (K) the weight row being used, widened

void gemv_scalar(const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t n0, int64_t n1,
                 const float *bias, float *y, int64_t ldy) {
  float *row = t_row.floats(size_t(K));
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t k = 0; k < K; ++k) row[k] = load_as_f32(w, wt, n * K + k);
    float b = bias ? bias[n] : 0.f;
    for (int64_t t = 0; t < T; ++t) {
      const float *xt = x + t * K;
      float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
      int64_t k = 0;
      for (; k + 4 <= K; k += 4) {
        s0 += xt[k] * row[k];
        s1 += xt[k + 1] * row[k + 1];
        s2 += xt[k + 2] * row[k + 2];
        s3 += xt[k + 3] * row[k + 3];
      }
      for (; k < K; ++k) s0 += xt[k] * row[k];
      y[t * ldy + n] = (s0 + s1) + (s2 + s3) + b;
    }
  }
}

const MatmulKernels kScalar = {Isa::Scalar, 0, 0, 0, gemv_scalar, nullptr, nullptr};

thread_local Scratch t_xperm;  // (T, K) x permuted for the bf16 gemv, filled by the calling thread
thread_local Scratch t_strip;  // (kc, nr) one packed weight strip of this thread

// Even elements of each `perm` chunk first, then the odd ones; the K % perm tail as it is.
const float *permute_x(const float *x, int64_t T, int64_t K, int perm) {
  float *xp = t_xperm.floats(size_t(T * K));
  int64_t kmain = K / perm * perm;
  int half = perm / 2;
  for (int64_t t = 0; t < T; ++t) {
    const float *src = x + t * K;
    float *dst = xp + t * K;
    for (int64_t c = 0; c < kmain; c += perm)
      for (int i = 0; i < half; ++i) {
        dst[c + i] = src[c + 2 * i];
        dst[c + half + i] = src[c + 2 * i + 1];
      }
    for (int64_t k = kmain; k < K; ++k) dst[k] = src[k];
  }
  return xp;
}

void run_decode(const MatmulKernels &kk, ThreadPool &pool, const float *x, int64_t T, int64_t K, const void *w,
                DType wt, int64_t N, const float *bias, float *y) {
  const float *xs = (wt == DType::BF16 && kk.perm > 0) ? permute_x(x, T, K, kk.perm) : x;
  // Below ~64 KiB of weights per thread, waking another thread costs more than it saves.
  int64_t grain = std::max<int64_t>(16, (64 << 10) / std::max<int64_t>(1, K * int64_t(dtype_size(wt))));
  pool.run(N, grain, [&](int64_t n0, int64_t n1, int) { kk.gemv(xs, T, K, w, wt, n0, n1, bias, y, N); });
}

void run_prefill(const MatmulKernels &kk, ThreadPool &pool, const float *x, int64_t T, int64_t K, const void *w,
                 DType wt, int64_t N, const float *bias, float *y) {
  const int nr = kk.nr, mr = kk.mr;
  const int64_t n_strips = (N + nr - 1) / nr;
  const int64_t kc = k_block() > 0 ? std::min(K, k_block()) : K;
  const size_t es = dtype_size(wt);
  pool.run(n_strips, 1, [&](int64_t s0, int64_t s1, int) {
    float *strip = t_strip.floats(size_t(kc * nr));
    float init[64];  // (nr) the strip's bias, zero-padded
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t n0 = s * nr;
      const int cols = int(std::min<int64_t>(nr, N - n0));
      for (int c = 0; c < nr; ++c) init[c] = (bias && c < cols) ? bias[n0 + c] : 0.f;
      const void *ws = static_cast<const uint8_t *>(w) + n0 * K * int64_t(es);
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t k1 = std::min(K, k0 + kc);
        kk.pack(ws, wt, K, cols, k0, k1, strip);
        for (int64_t t0 = 0; t0 < T; t0 += mr)
          kk.tile(strip, x + t0 * K + k0, K, k1 - k0, int(std::min<int64_t>(mr, T - t0)), init, k0 > 0,
                  y + t0 * N + n0, N, cols);
      }
    }
  });
}

}  // namespace

void pack_strip_generic(const void *w, DType wt, int64_t K, int rows, int nr, int64_t k0, int64_t k1, float *dst) {
  switch (wt) {
    case DType::F32: pack_strip_t<DType::F32>(w, K, rows, nr, k0, k1, dst); break;
    case DType::F16: pack_strip_t<DType::F16>(w, K, rows, nr, k0, k1, dst); break;
    case DType::BF16: pack_strip_t<DType::BF16>(w, K, rows, nr, k0, k1, dst); break;
  }
}

const MatmulKernels *matmul_kernels_scalar() { return &kScalar; }

void matmul_set_k_block(int64_t kc) { g_k_block.store(kc < 0 ? 0 : kc, std::memory_order_relaxed); }

const MatmulKernels &matmul_kernels(Isa isa) {
  const MatmulKernels *k = nullptr;
  switch (isa) {
    case Isa::Scalar: k = matmul_kernels_scalar(); break;
    case Isa::Avx2: k = matmul_kernels_avx2(); break;
    case Isa::Avx512: k = matmul_kernels_avx512(); break;
    case Isa::Neon: k = matmul_kernels_neon(); break;
  }
  return k ? *k : kScalar;
}

void matmul_with(const MatmulKernels &kk, ThreadPool &pool, const float *x, int64_t T, int64_t K, const void *w,
                 DType wt, int64_t N, const float *bias, float *y) {
  if (T <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum: only the bias
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) y[t * N + n] = bias ? bias[n] : 0.f;
    return;
  }
  if (T <= kDecodeMaxTokens || !kk.pack)
    run_decode(kk, pool, x, T, K, w, wt, N, bias, y);
  else
    run_prefill(kk, pool, x, T, K, w, wt, N, bias, y);
}

void matmul(ThreadPool &pool, const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t N,
            const float *bias, float *y) {
  matmul_with(matmul_kernels(isa_active()), pool, x, T, K, w, wt, N, bias, y);
}

}  // namespace vt::cpu
