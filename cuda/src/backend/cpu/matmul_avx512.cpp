// AVX-512 matmul kernels (AVX512F only, so any AVX-512 CPU qualifies). Compiled for the x86-64 baseline;
// every function that uses the instructions carries the target attribute, and matmul_kernels(Isa::Avx512)
// is only handed out when the CPU reports avx512f (see cpu_isa.cpp).
#include "backend/cpu/matmul_kernels.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own `__Y = __Y` placeholders (GCC PR 105593)
// once the intrinsics are inlined into a target("avx512f") function; the warning is about the header only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#define VT_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define VT_AVX512_INLINE __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) inline

namespace vt::cpu {

namespace {

constexpr int kNR = 32;    // packed strip: two zmm of outputs per k
constexpr int kMR = 12;    // tokens per tile: 24 accumulators + 2 weights + 1 broadcast of 32 zmm registers
constexpr int kPerm = 32;  // bf16 gemv: one 64-byte load = 32 weights = 16 even + 16 odd
// gemv: software prefetch distance along each weight row. The hardware prefetchers alone left DRAM reads
// 15-25% short of what this reaches with several rows streaming per core (measured 256..2048: 512 best).
constexpr int kPrefetch = 512;

// 32 consecutive weights at p as two fp32 vectors. bf16: a dword holds elements 2i (low half) and 2i+1
// (high half), so a shift gives the even elements and a mask the odd ones, matching the permuted x.
template <DType WT>
VT_AVX512_INLINE void load32(const uint8_t *p, __m512 &lo, __m512 &hi) {
  if constexpr (WT == DType::BF16) {
    __m512i v = _mm512_loadu_si512(p);
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  } else if constexpr (WT == DType::F16) {
    lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 32)));
  } else {
    lo = _mm512_loadu_ps(reinterpret_cast<const float *>(p));
    hi = _mm512_loadu_ps(reinterpret_cast<const float *>(p + 64));
  }
}

// out[r * TT + t] = w_row(r) · x_t over k < kmain (a multiple of 32). R rows stream from memory side by side
// (several independent streams keep enough loads in flight); each widened weight vector meets all TT tokens.
template <DType WT, int R, int TT>
VT_AVX512 void gemv_block(const float *x, int64_t ldx, const uint8_t *w, int64_t ldw, int64_t kmain, float *out) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  __m512 acc[R][TT];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kmain; k += 32) {
    __m512 lo[R], hi[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      _mm_prefetch(reinterpret_cast<const char *>(w + r * ldw + k * es) + kPrefetch, _MM_HINT_T0);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) load32<WT>(w + r * ldw + k * es, lo[r], hi[r]);
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      __m512 x0 = _mm512_loadu_ps(x + t * ldx + k), x1 = _mm512_loadu_ps(x + t * ldx + k + 16);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        acc[r][t] = _mm512_fmadd_ps(lo[r], x0, acc[r][t]);
        acc[r][t] = _mm512_fmadd_ps(hi[r], x1, acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) out[r * TT + t] = _mm512_reduce_add_ps(acc[r][t]);
}

// Rows [n, n + R) for all T tokens, in tiles of up to TTMAX tokens.
template <DType WT, int R, int TTMAX>
VT_AVX512 void gemv_rows(const float *x, int64_t T, int64_t K, const uint8_t *w, int64_t n, const float *bias,
                         float *y, int64_t ldy) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  const int64_t kmain = K / 32 * 32, ldw = K * es;
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
VT_AVX512 void gemv_t(const float *x, int64_t T, int64_t K, const void *w, int64_t n0, int64_t n1,
                      const float *bias, float *y, int64_t ldy) {
  auto wb = static_cast<const uint8_t *>(w);
  int64_t n = n0;
  if (T == 1)  // one token leaves registers for eight weight streams
    for (; n + 8 <= n1; n += 8) gemv_rows<WT, 8, 1>(x, T, K, wb, n, bias, y, ldy);
  for (; n + 4 <= n1; n += 4) gemv_rows<WT, 4, 4>(x, T, K, wb, n, bias, y, ldy);
  for (; n < n1; ++n) gemv_rows<WT, 1, 4>(x, T, K, wb, n, bias, y, ldy);
}

VT_AVX512 void gemv(const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t n0, int64_t n1,
                    const float *bias, float *y, int64_t ldy) {
  switch (wt) {
    case DType::BF16: gemv_t<DType::BF16>(x, T, K, w, n0, n1, bias, y, ldy); break;
    case DType::F16: gemv_t<DType::F16>(x, T, K, w, n0, n1, bias, y, ldy); break;
    case DType::F32: gemv_t<DType::F32>(x, T, K, w, n0, n1, bias, y, ldy); break;
  }
}

// ---- prefill ----

// 16 weights of one row at p, widened.
template <DType WT>
VT_AVX512_INLINE __m512 load16(const uint8_t *p) {
  if constexpr (WT == DType::BF16)
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))), 16));
  else if constexpr (WT == DType::F16)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  else
    return _mm512_loadu_ps(reinterpret_cast<const float *>(p));
}

// In-register transpose of 16×16 floats: r[i] holds row i on entry, column i on exit.
VT_AVX512_INLINE void transpose16(__m512 r[16]) {
  __m512 t[16];
  #pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // r[4q + j] now holds, in each 128-bit lane L, rows 4q..4q+3 of column 4L + j.
  #pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    #pragma GCC unroll 16
    for (int q = 0; q < 4; q += 2) {
      t[4 * q + i] = _mm512_shuffle_f32x4(r[4 * q + i], r[4 * (q + 1) + i], 0x88);      // lanes 0,2 | 0,2
      t[4 * q + 4 + i] = _mm512_shuffle_f32x4(r[4 * q + i], r[4 * (q + 1) + i], 0xdd);  // lanes 1,3 | 1,3
    }
    // t[i]: (q0 L0, q0 L2, q1 L0, q1 L2); t[4+i]: L1, L3 of q0,q1; t[8+i], t[12+i]: the same for q2,q3.
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);            // column i: rows q0..q3 of lane 0
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);        // lane 2: column 8 + i
    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);   // lane 1: column 4 + i
    r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);  // lane 3: column 12 + i
  }
}

template <DType WT>
VT_AVX512 void pack_t(const void *w, int64_t K, int rows, int64_t k0, int64_t k1, float *dst) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  auto wb = static_cast<const uint8_t *>(w);
  int64_t k = k0;
  if (rows == kNR) {
    for (; k + 16 <= k1; k += 16)
      #pragma GCC unroll 16
      for (int h = 0; h < kNR; h += 16) {
        __m512 r[16];
        #pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = load16<WT>(wb + ((h + i) * K + k) * es);
        transpose16(r);
        #pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_storeu_ps(dst + (k - k0 + j) * kNR + h, r[j]);
      }
  }
  if (k < k1) {  // ragged tail of K, or a partial strip: the scalar way
    float *d = dst + (k - k0) * kNR;
    pack_strip_generic(wb + k * es, WT, K, rows, kNR, 0, k1 - k, d);
  }
}

void pack(const void *w, DType wt, int64_t K, int rows, int64_t k0, int64_t k1, float *dst) {
  switch (wt) {
    case DType::BF16: pack_t<DType::BF16>(w, K, rows, k0, k1, dst); break;
    case DType::F16: pack_t<DType::F16>(w, K, rows, k0, k1, dst); break;
    case DType::F32: pack_t<DType::F32>(w, K, rows, k0, k1, dst); break;
  }
}

// y(MR, 32) (+)= x(MR, kc) · dst(kc, 32)ᵀ, the 2 × MR accumulators in registers for the whole k loop.
template <int MR>
VT_AVX512 void tile_t(const float *dst, const float *x, int64_t ldx, int64_t kc, const float *init,
                      bool accumulate, float *y, int64_t ldy, int cols) {
  const __mmask16 m0 = cols >= 16 ? 0xffff : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? 0xffff : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : 0;
  __m512 c0[MR], c1[MR];
  #pragma GCC unroll 16
  for (int t = 0; t < MR; ++t) {
    if (accumulate) {
      c0[t] = _mm512_maskz_loadu_ps(m0, y + t * ldy);
      c1[t] = _mm512_maskz_loadu_ps(m1, y + t * ldy + 16);
    } else {
      c0[t] = _mm512_loadu_ps(init);
      c1[t] = _mm512_loadu_ps(init + 16);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m512 w0 = _mm512_load_ps(dst + k * kNR), w1 = _mm512_load_ps(dst + k * kNR + 16);
    #pragma GCC unroll 16
    for (int t = 0; t < MR; ++t) {
      __m512 b = _mm512_set1_ps(x[t * ldx + k]);
      c0[t] = _mm512_fmadd_ps(w0, b, c0[t]);
      c1[t] = _mm512_fmadd_ps(w1, b, c1[t]);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < MR; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, m0, c0[t]);
    _mm512_mask_storeu_ps(y + t * ldy + 16, m1, c1[t]);
  }
}

void tile(const float *dst, const float *x, int64_t ldx, int64_t kc, int mr, const float *init, bool accumulate,
          float *y, int64_t ldy, int cols) {
  using Fn = void (*)(const float *, const float *, int64_t, int64_t, const float *, bool, float *, int64_t, int);
  static constexpr Fn fns[kMR] = {tile_t<1>, tile_t<2>, tile_t<3>, tile_t<4>,  tile_t<5>,  tile_t<6>,
                                  tile_t<7>, tile_t<8>, tile_t<9>, tile_t<10>, tile_t<11>, tile_t<12>};
  fns[mr - 1](dst, x, ldx, kc, init, accumulate, y, ldy, cols);
}

const MatmulKernels kAvx512 = {Isa::Avx512, kNR, kMR, kPerm, gemv, pack, tile};

}  // namespace

const MatmulKernels *matmul_kernels_avx512() { return &kAvx512; }

}  // namespace vt::cpu

#else

namespace vt::cpu {
const MatmulKernels *matmul_kernels_avx512() { return nullptr; }
}  // namespace vt::cpu

#endif
