// NEON (Advanced SIMD, baseline on every arm64 CPU) matmul kernels: the shapes of matmul_avx512.cpp on 128-bit
// vectors (32 of them). The prefill pack is the scalar one: it is amortised over all token tiles anyway.
#include "backend/cpu/matmul_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <algorithm>

namespace vt::cpu {

namespace {

constexpr int kNR = 16;   // packed strip: four q registers of outputs per k
constexpr int kMR = 6;    // tokens per tile: 24 accumulators + 4 weights + 1 broadcast of 32 registers
constexpr int kPerm = 8;  // bf16 gemv: one 16-byte load = 8 weights = 4 even + 4 odd

// 8 consecutive weights at p as two fp32 vectors (bf16: even elements, then odd ones; see matmul_kernels.h).
template <DType WT>
inline void load8(const uint8_t *p, float32x4_t &lo, float32x4_t &hi) {
  if constexpr (WT == DType::BF16) {
    uint32x4_t v = vld1q_u32(reinterpret_cast<const uint32_t *>(p));
    lo = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
    hi = vreinterpretq_f32_u32(vandq_u32(v, vdupq_n_u32(0xffff0000u)));
  } else if constexpr (WT == DType::F16) {
    lo = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t *>(p))));
    hi = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t *>(p + 8))));
  } else {
    lo = vld1q_f32(reinterpret_cast<const float *>(p));
    hi = vld1q_f32(reinterpret_cast<const float *>(p + 16));
  }
}

template <DType WT, int R, int TT>
void gemv_block(const float *x, int64_t ldx, const uint8_t *w, int64_t ldw, int64_t kmain, float *out) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  float32x4_t acc[R][TT];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = vdupq_n_f32(0.f);
  for (int64_t k = 0; k < kmain; k += 8) {
    float32x4_t lo[R], hi[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) load8<WT>(w + r * ldw + k * es, lo[r], hi[r]);
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      float32x4_t x0 = vld1q_f32(x + t * ldx + k), x1 = vld1q_f32(x + t * ldx + k + 4);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        acc[r][t] = vfmaq_f32(acc[r][t], lo[r], x0);
        acc[r][t] = vfmaq_f32(acc[r][t], hi[r], x1);
      }
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) out[r * TT + t] = vaddvq_f32(acc[r][t]);
}

// Rows [n, n + R) for all T tokens, in tiles of up to TTMAX tokens.
template <DType WT, int R, int TTMAX>
void gemv_rows(const float *x, int64_t T, int64_t K, const uint8_t *w, int64_t n, const float *bias, float *y,
               int64_t ldy) {
  constexpr int64_t es = WT == DType::F32 ? 4 : 2;
  const int64_t kmain = K / 8 * 8, ldw = K * es;
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
void gemv_t(const float *x, int64_t T, int64_t K, const void *w, int64_t n0, int64_t n1, const float *bias,
            float *y, int64_t ldy) {
  auto wb = static_cast<const uint8_t *>(w);
  int64_t n = n0;
  if (T == 1)
    for (; n + 8 <= n1; n += 8) gemv_rows<WT, 8, 1>(x, T, K, wb, n, bias, y, ldy);
  for (; n + 4 <= n1; n += 4) gemv_rows<WT, 4, 4>(x, T, K, wb, n, bias, y, ldy);
  for (; n < n1; ++n) gemv_rows<WT, 1, 4>(x, T, K, wb, n, bias, y, ldy);
}

void gemv(const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t n0, int64_t n1, const float *bias,
          float *y, int64_t ldy) {
  switch (wt) {
    case DType::BF16: gemv_t<DType::BF16>(x, T, K, w, n0, n1, bias, y, ldy); break;
    case DType::F16: gemv_t<DType::F16>(x, T, K, w, n0, n1, bias, y, ldy); break;
    case DType::F32: gemv_t<DType::F32>(x, T, K, w, n0, n1, bias, y, ldy); break;
  }
}

void pack(const void *w, DType wt, int64_t K, int rows, int64_t k0, int64_t k1, float *dst) {
  pack_strip_generic(w, wt, K, rows, kNR, k0, k1, dst);
}

template <int MR>
void tile_t(const float *dst, const float *x, int64_t ldx, int64_t kc, const float *init, bool accumulate,
            float *y, int64_t ldy, int cols) {
  float32x4_t c[MR][4];
  #pragma GCC unroll 16
  for (int t = 0; t < MR; ++t)
    #pragma GCC unroll 16
    for (int v = 0; v < 4; ++v) {
      if (!accumulate) {
        c[t][v] = vld1q_f32(init + 4 * v);
      } else if (cols == kNR) {
        c[t][v] = vld1q_f32(y + t * ldy + 4 * v);
      } else {
        float buf[4] = {0.f, 0.f, 0.f, 0.f};
        for (int i = 0; i < 4 && 4 * v + i < cols; ++i) buf[i] = y[t * ldy + 4 * v + i];
        c[t][v] = vld1q_f32(buf);
      }
    }
  for (int64_t k = 0; k < kc; ++k) {
    const float *d = dst + k * kNR;
    float32x4_t w0 = vld1q_f32(d), w1 = vld1q_f32(d + 4), w2 = vld1q_f32(d + 8), w3 = vld1q_f32(d + 12);
    #pragma GCC unroll 16
    for (int t = 0; t < MR; ++t) {
      float32x4_t b = vld1q_dup_f32(x + t * ldx + k);
      c[t][0] = vfmaq_f32(c[t][0], w0, b);
      c[t][1] = vfmaq_f32(c[t][1], w1, b);
      c[t][2] = vfmaq_f32(c[t][2], w2, b);
      c[t][3] = vfmaq_f32(c[t][3], w3, b);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < MR; ++t)
    #pragma GCC unroll 16
    for (int v = 0; v < 4; ++v) {
      if (cols == kNR) {
        vst1q_f32(y + t * ldy + 4 * v, c[t][v]);
      } else {
        float buf[4];
        vst1q_f32(buf, c[t][v]);
        for (int i = 0; i < 4 && 4 * v + i < cols; ++i) y[t * ldy + 4 * v + i] = buf[i];
      }
    }
}

void tile(const float *dst, const float *x, int64_t ldx, int64_t kc, int mr, const float *init, bool accumulate,
          float *y, int64_t ldy, int cols) {
  using Fn = void (*)(const float *, const float *, int64_t, int64_t, const float *, bool, float *, int64_t, int);
  static constexpr Fn fns[kMR] = {tile_t<1>, tile_t<2>, tile_t<3>, tile_t<4>, tile_t<5>, tile_t<6>};
  fns[mr - 1](dst, x, ldx, kc, init, accumulate, y, ldy, cols);
}

const MatmulKernels kNeon = {Isa::Neon, kNR, kMR, kPerm, gemv, pack, tile};

}  // namespace

const MatmulKernels *matmul_kernels_neon() { return &kNeon; }

}  // namespace vt::cpu

#else

namespace vt::cpu {
const MatmulKernels *matmul_kernels_neon() { return nullptr; }
}  // namespace vt::cpu

#endif
