// AVX2 + FMA + F16C matmul kernels: the same shapes as matmul_avx512.cpp at half the vector width and with
// 16 registers instead of 32, hence smaller blocks. Handed out only when the CPU reports all three features.
#include "backend/cpu/matmul_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>

#define VT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define VT_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace vt::cpu {

namespace {

constexpr int kNR = 16;    // packed strip: two ymm of outputs per k
constexpr int kMR = 6;     // tokens per tile: 12 accumulators + 2 weights + 1 broadcast of 16 ymm registers
constexpr int kPerm = 16;  // bf16 gemv: one 32-byte load = 16 weights = 8 even + 8 odd
// gemv: software prefetch distance along each weight row. The hardware prefetchers alone left DRAM reads
// 15-25% short of what this reaches with several rows streaming per core (measured 256..2048: 512 best).
constexpr int kPrefetch = 512;

// 16 consecutive weights at p as two fp32 vectors (bf16: even elements, then odd ones; see load32 in the
// AVX-512 file).
template <DType WT>
VT_AVX2_INLINE void load16(const uint8_t *p, __m256 &lo, __m256 &hi) {
  if constexpr (WT == DType::BF16) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  } else if constexpr (WT == DType::F16) {
    lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16)));
  } else {
    lo = _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    hi = _mm256_loadu_ps(reinterpret_cast<const float *>(p + 32));
  }
}

VT_AVX2_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <DType WT, int R, int TT>
VT_AVX2 void gemv_block(const float *x, int64_t ldx, const uint8_t *w, int64_t ldw, int64_t kmain, float *out) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  __m256 acc[R][TT];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kmain; k += 16) {
    __m256 lo[R], hi[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      _mm_prefetch(reinterpret_cast<const char *>(w + r * ldw + k * es) + kPrefetch, _MM_HINT_T0);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) load16<WT>(w + r * ldw + k * es, lo[r], hi[r]);
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      __m256 x0 = _mm256_loadu_ps(x + t * ldx + k), x1 = _mm256_loadu_ps(x + t * ldx + k + 8);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        acc[r][t] = _mm256_fmadd_ps(lo[r], x0, acc[r][t]);
        acc[r][t] = _mm256_fmadd_ps(hi[r], x1, acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) out[r * TT + t] = hsum(acc[r][t]);
}

// Rows [n, n + R) for all T tokens, in tiles of up to TTMAX tokens.
template <DType WT, int R, int TTMAX>
VT_AVX2 void gemv_rows(const float *x, int64_t T, int64_t K, const uint8_t *w, int64_t n, const float *bias,
                       float *y, int64_t ldy) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  const int64_t kmain = K / 16 * 16, ldw = K * es;
  const uint8_t *wn = w + n * ldw;
  float out[R * TTMAX];
  for (int64_t t0 = 0; t0 < T; t0 += TTMAX) {
    const int tt = int(std::min<int64_t>(TTMAX, T - t0));
    const float *xt = x + t0 * K;
    if constexpr (TTMAX == 1) {
      gemv_block<WT, R, 1>(xt, K, wn, ldw, kmain, out);
    } else {
      switch (tt) {
        case 1: gemv_block<WT, R, 1>(xt, K, wn, ldw, kmain, out); break;
        case 2: gemv_block<WT, R, 2>(xt, K, wn, ldw, kmain, out); break;
        case 3: gemv_block<WT, R, 3>(xt, K, wn, ldw, kmain, out); break;
        default: gemv_block<WT, R, 4>(xt, K, wn, ldw, kmain, out); break;
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < tt; ++t) {
        float s = out[r * tt + t];
        if (kmain < K) s += dot_tail(xt + t * K, wn + r * ldw, WT, kmain, K);
        y[(t0 + t) * ldy + n + r] = s + (bias ? bias[n + r] : 0.f);
      }
  }
}

template <DType WT>
VT_AVX2 void gemv_t(const float *x, int64_t T, int64_t K, const void *w, int64_t n0, int64_t n1,
                    const float *bias, float *y, int64_t ldy) {
  auto wb = static_cast<const uint8_t *>(w);
  int64_t n = n0;
  if (T == 1)
    for (; n + 4 <= n1; n += 4) gemv_rows<WT, 4, 1>(x, T, K, wb, n, bias, y, ldy);
  for (; n + 2 <= n1; n += 2) gemv_rows<WT, 2, 4>(x, T, K, wb, n, bias, y, ldy);
  for (; n < n1; ++n) gemv_rows<WT, 1, 4>(x, T, K, wb, n, bias, y, ldy);
}

VT_AVX2 void gemv(const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t n0, int64_t n1,
                  const float *bias, float *y, int64_t ldy) {
  switch (wt) {
    case DType::BF16: gemv_t<DType::BF16>(x, T, K, w, n0, n1, bias, y, ldy); break;
    case DType::F16: gemv_t<DType::F16>(x, T, K, w, n0, n1, bias, y, ldy); break;
    case DType::F32: gemv_t<DType::F32>(x, T, K, w, n0, n1, bias, y, ldy); break;
  }
}

// ---- prefill ----

template <DType WT>
VT_AVX2_INLINE __m256 load8(const uint8_t *p) {
  if constexpr (WT == DType::BF16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))), 16));
  else if constexpr (WT == DType::F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  else
    return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
}

// In-register transpose of 8×8 floats: r[i] holds row i on entry, column i on exit.
VT_AVX2_INLINE void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  #pragma GCC unroll 16
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 8; i += 4) {  // u[i + j], lane L: rows i..i+3 of column 4L + j
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  #pragma GCC unroll 16
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

template <DType WT>
VT_AVX2 void pack_t(const void *w, int64_t K, int rows, int64_t k0, int64_t k1, float *dst) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  auto wb = static_cast<const uint8_t *>(w);
  int64_t k = k0;
  if (rows == kNR) {
    for (; k + 8 <= k1; k += 8)
      #pragma GCC unroll 16
      for (int h = 0; h < kNR; h += 8) {
        __m256 r[8];
        #pragma GCC unroll 16
        for (int i = 0; i < 8; ++i) r[i] = load8<WT>(wb + ((h + i) * K + k) * es);
        transpose8(r);
        #pragma GCC unroll 16
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (k - k0 + j) * kNR + h, r[j]);
      }
  }
  if (k < k1) pack_strip_generic(wb + k * es, WT, K, rows, kNR, 0, k1 - k, dst + (k - k0) * kNR);
}

void pack(const void *w, DType wt, int64_t K, int rows, int64_t k0, int64_t k1, float *dst) {
  switch (wt) {
    case DType::BF16: pack_t<DType::BF16>(w, K, rows, k0, k1, dst); break;
    case DType::F16: pack_t<DType::F16>(w, K, rows, k0, k1, dst); break;
    case DType::F32: pack_t<DType::F32>(w, K, rows, k0, k1, dst); break;
  }
}

template <int MR>
VT_AVX2 void tile_t(const float *dst, const float *x, int64_t ldx, int64_t kc, const float *init, bool accumulate,
                    float *y, int64_t ldy, int cols) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), iota);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), iota);
  __m256 c0[MR], c1[MR];
  #pragma GCC unroll 16
  for (int t = 0; t < MR; ++t) {
    if (accumulate) {
      c0[t] = _mm256_maskload_ps(y + t * ldy, m0);
      c1[t] = _mm256_maskload_ps(y + t * ldy + 8, m1);
    } else {
      c0[t] = _mm256_loadu_ps(init);
      c1[t] = _mm256_loadu_ps(init + 8);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m256 w0 = _mm256_load_ps(dst + k * kNR), w1 = _mm256_load_ps(dst + k * kNR + 8);
    #pragma GCC unroll 8
    for (int t = 0; t < MR; ++t) {
      __m256 b = _mm256_broadcast_ss(x + t * ldx + k);
      c0[t] = _mm256_fmadd_ps(w0, b, c0[t]);
      c1[t] = _mm256_fmadd_ps(w1, b, c1[t]);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < MR; ++t) {
    _mm256_maskstore_ps(y + t * ldy, m0, c0[t]);
    _mm256_maskstore_ps(y + t * ldy + 8, m1, c1[t]);
  }
}

void tile(const float *dst, const float *x, int64_t ldx, int64_t kc, int mr, const float *init, bool accumulate,
          float *y, int64_t ldy, int cols) {
  using Fn = void (*)(const float *, const float *, int64_t, int64_t, const float *, bool, float *, int64_t, int);
  static constexpr Fn fns[kMR] = {tile_t<1>, tile_t<2>, tile_t<3>, tile_t<4>, tile_t<5>, tile_t<6>};
  fns[mr - 1](dst, x, ldx, kc, init, accumulate, y, ldy, cols);
}

const MatmulKernels kAvx2 = {Isa::Avx2, kNR, kMR, kPerm, gemv, pack, tile};

}  // namespace

const MatmulKernels *matmul_kernels_avx2() { return &kAvx2; }

}  // namespace vt::cpu

#else

namespace vt::cpu {
const MatmulKernels *matmul_kernels_avx2() { return nullptr; }
}  // namespace vt::cpu

#endif
