// The inner loops of paged attention (see attention_kernels.h) for each ISA. Scores take eight keys at a time
// and reduce them together; accumulate keeps a slice of the output in registers while it walks all keys of
// the chunk, so the output is loaded and stored once per chunk instead of once per key.
#include "backend/cpu/attention_kernels.h"

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, see matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace vt::cpu {

namespace {

void scores_scalar(const float *q, const float *const *k, int n, int hd, float *s) {
  for (int j = 0; j < n; ++j) {
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    int d = 0;
    for (; d + 4 <= hd; d += 4) {
      a0 += q[d] * k[j][d];
      a1 += q[d + 1] * k[j][d + 1];
      a2 += q[d + 2] * k[j][d + 2];
      a3 += q[d + 3] * k[j][d + 3];
    }
    for (; d < hd; ++d) a0 += q[d] * k[j][d];
    s[j] = (a0 + a1) + (a2 + a3);
  }
}

void accumulate_scalar(const float *p, const float *const *v, int n, int hd, float alpha, float *acc) {
  for (int d = 0; d < hd; ++d) acc[d] *= alpha;
  for (int j = 0; j < n; ++j)
    for (int d = 0; d < hd; ++d) acc[d] += p[j] * v[j][d];
}

#if defined(__x86_64__)

#define VT_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define VT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define VT_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#define VT_AVX512_INLINE __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) inline

// Horizontal sums of eight vectors at once, out[i] = Σ lanes of a[i]: a tree of hadds shared by all eight
// costs about a third of eight separate reductions, which otherwise rival the dot products themselves.
VT_AVX2_INLINE __m256 hsum8(const __m256 a[8]) {
  __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  t0 = _mm256_hadd_ps(t0, t1);  // per 128-bit half: partial sums of a0..a3
  t2 = _mm256_hadd_ps(t2, t3);  // and of a4..a7
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t2, 0x20), _mm256_permute2f128_ps(t0, t2, 0x31));
}

VT_AVX2_INLINE float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

VT_AVX2_INLINE __m256i mask8(int left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

VT_AVX512 void scores_avx512(const float *q, const float *const *k, int n, int hd, float *s) {
  const int dm = hd / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (hd - dm)) - 1);
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    __m512 a[8];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = _mm512_setzero_ps();
    for (int d = 0; d < dm; d += 16) {
      __m512 qv = _mm512_loadu_ps(q + d);
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k[j + i] + d), a[i]);
    }
    if (tail) {
      __m512 qv = _mm512_maskz_loadu_ps(tail, q + dm);
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(tail, k[j + i] + dm), a[i]);
    }
    __m256 h[8];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      h[i] = _mm256_add_ps(_mm512_castps512_ps256(a[i]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[i]), 1)));
    _mm256_storeu_ps(s + j, hsum8(h));
  }
  for (; j < n; ++j) {
    __m512 a = _mm512_setzero_ps();
    for (int d = 0; d < dm; d += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k[j] + d), a);
    if (tail) a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + dm), _mm512_maskz_loadu_ps(tail, k[j] + dm), a);
    s[j] = _mm512_reduce_add_ps(a);
  }
}

// acc = acc * alpha + Σ_j p_j v_j, a slice of `W` vectors of the output held in registers across all keys:
// eight independent chains keep both FMA ports busy despite the 4-cycle latency.
template <int W>
VT_AVX512_INLINE void accumulate_slice512(const float *p, const float *const *v, int n, int d, __m512 al, float *acc) {
  __m512 a[W];
  #pragma GCC unroll 8
  for (int i = 0; i < W; ++i) a[i] = _mm512_mul_ps(_mm512_loadu_ps(acc + d + 16 * i), al);
  for (int j = 0; j < n; ++j) {
    __m512 pj = _mm512_set1_ps(p[j]);
    #pragma GCC unroll 8
    for (int i = 0; i < W; ++i) a[i] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v[j] + d + 16 * i), a[i]);
  }
  #pragma GCC unroll 8
  for (int i = 0; i < W; ++i) _mm512_storeu_ps(acc + d + 16 * i, a[i]);
}

VT_AVX512 void accumulate_avx512(const float *p, const float *const *v, int n, int hd, float alpha, float *acc) {
  const __m512 al = _mm512_set1_ps(alpha);
  int d = 0;
  for (; d + 128 <= hd; d += 128) accumulate_slice512<8>(p, v, n, d, al, acc);
  for (; d + 64 <= hd; d += 64) accumulate_slice512<4>(p, v, n, d, al, acc);
  for (; d < hd; d += 16) {
    const __mmask16 m = hd - d >= 16 ? __mmask16(0xffff) : __mmask16((1u << (hd - d)) - 1);
    __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + d), al);
    for (int j = 0; j < n; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, v[j] + d), a);
    _mm512_mask_storeu_ps(acc + d, m, a);
  }
}

VT_AVX2 void scores_avx2(const float *q, const float *const *k, int n, int hd, float *s) {
  const int dm = hd / 8 * 8;
  const __m256i tail = mask8(hd - dm);
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 a[8];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
    for (int d = 0; d < dm; d += 8) {
      __m256 qv = _mm256_loadu_ps(q + d);
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[j + i] + d), a[i]);
    }
    if (dm < hd) {
      __m256 qv = _mm256_maskload_ps(q + dm, tail);
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k[j + i] + dm, tail), a[i]);
    }
    _mm256_storeu_ps(s + j, hsum8(a));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    for (int d = 0; d < dm; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k[j] + d), a);
    if (dm < hd) a = _mm256_fmadd_ps(_mm256_maskload_ps(q + dm, tail), _mm256_maskload_ps(k[j] + dm, tail), a);
    s[j] = hsum256(a);
  }
}

VT_AVX2 void accumulate_avx2(const float *p, const float *const *v, int n, int hd, float alpha, float *acc) {
  const __m256 al = _mm256_set1_ps(alpha);
  int d = 0;
  for (; d + 64 <= hd; d += 64) {  // 8 chains, as in accumulate_slice512
    __m256 a[8];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = _mm256_mul_ps(_mm256_loadu_ps(acc + d + 8 * i), al);
    for (int j = 0; j < n; ++j) {
      __m256 pj = _mm256_broadcast_ss(p + j);
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v[j] + d + 8 * i), a[i]);
    }
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(acc + d + 8 * i, a[i]);
  }
  for (; d < hd; d += 8) {
    const __m256i m = mask8(hd - d);
    __m256 a = _mm256_mul_ps(_mm256_maskload_ps(acc + d, m), al);
    for (int j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_maskload_ps(v[j] + d, m), a);
    _mm256_maskstore_ps(acc + d, m, a);
  }
}

#endif  // __x86_64__

#if defined(__aarch64__)

void scores_neon(const float *q, const float *const *k, int n, int hd, float *s) {
  const int dm = hd / 4 * 4;
  for (int j = 0; j < n; ++j) {
    float32x4_t a0 = vdupq_n_f32(0.f), a1 = vdupq_n_f32(0.f);
    int d = 0;
    for (; d + 8 <= dm; d += 8) {
      a0 = vfmaq_f32(a0, vld1q_f32(q + d), vld1q_f32(k[j] + d));
      a1 = vfmaq_f32(a1, vld1q_f32(q + d + 4), vld1q_f32(k[j] + d + 4));
    }
    for (; d < dm; d += 4) a0 = vfmaq_f32(a0, vld1q_f32(q + d), vld1q_f32(k[j] + d));
    float r = vaddvq_f32(vaddq_f32(a0, a1));
    for (; d < hd; ++d) r += q[d] * k[j][d];
    s[j] = r;
  }
}

void accumulate_neon(const float *p, const float *const *v, int n, int hd, float alpha, float *acc) {
  int d = 0;
  for (; d + 16 <= hd; d += 16) {
    float32x4_t a[4];
    #pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) a[i] = vmulq_n_f32(vld1q_f32(acc + d + 4 * i), alpha);
    for (int j = 0; j < n; ++j)
      #pragma GCC unroll 16
      for (int i = 0; i < 4; ++i) a[i] = vfmaq_n_f32(a[i], vld1q_f32(v[j] + d + 4 * i), p[j]);
    #pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) vst1q_f32(acc + d + 4 * i, a[i]);
  }
  for (; d < hd; ++d) {
    float a = acc[d] * alpha;
    for (int j = 0; j < n; ++j) a += p[j] * v[j][d];
    acc[d] = a;
  }
}

#endif  // __aarch64__

const AttentionKernels kScalar = {scores_scalar, accumulate_scalar};
#if defined(__x86_64__)
const AttentionKernels kAvx2 = {scores_avx2, accumulate_avx2};
const AttentionKernels kAvx512 = {scores_avx512, accumulate_avx512};
#endif
#if defined(__aarch64__)
const AttentionKernels kNeon = {scores_neon, accumulate_neon};
#endif

}  // namespace

const AttentionKernels &attention_kernels(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2: return kAvx2;
    case Isa::Avx512: return kAvx512;
#endif
#if defined(__aarch64__)
    case Isa::Neon: return kNeon;
#endif
    default: return kScalar;
  }
}

}  // namespace vt::cpu
