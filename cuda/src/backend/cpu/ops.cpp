// The small per-token ops of the CPU backend: embedding lookup, RMSNorm (plain and fused with the residual
// add), rotary embedding, SiLU-gated product, KV-cache store. Each is a few arithmetic operations per element
// next to the matmuls around it, so they are plain C++ that the compiler vectorises where it can, threaded
// over rows only when there are enough rows to pay for waking the pool.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/scratch.h"

namespace vt::cpu {

namespace {

// Rows per chunk so that a chunk is at least ~16K elements of work.
int64_t row_grain(int64_t elems_per_row) {
  return std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(1, elems_per_row));
}

// Sum of squares with eight independent partial sums: no loop-carried dependency on one register (and a
// shape the vectoriser recognises), fp32 like the rest of the activations.
float sum_squares(const float *x, int64_t n) {
  float s[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += x[i + j] * x[i + j];
  for (; i < n; ++i) s[0] += x[i] * x[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void norm_row(const float *x, int64_t dim, const float *weight, float eps, float *out) {
  const float inv = 1.f / std::sqrt(sum_squares(x, dim) / float(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inv * weight[i];
}

}  // namespace

void embed(const void *table, DType dt, int64_t dim, const int32_t *ids, int64_t T, float *out) {
  const size_t es = dtype_size(dt);
  for (int64_t t = 0; t < T; ++t) {
    const void *row = static_cast<const uint8_t *>(table) + int64_t(ids[t]) * dim * int64_t(es);
    float *o = out + t * dim;
    switch (dt) {
      case DType::F32: std::memcpy(o, row, size_t(dim) * sizeof(float)); break;
      case DType::BF16: {
        auto h = static_cast<const uint16_t *>(row);
        for (int64_t i = 0; i < dim; ++i) o[i] = bf16_to_f32(h[i]);
        break;
      }
      case DType::F16: {
        auto h = static_cast<const uint16_t *>(row);
        for (int64_t i = 0; i < dim; ++i) o[i] = f16_to_f32(h[i]);
        break;
      }
    }
  }
}

void rmsnorm(ThreadPool &pool, float *x, int64_t rows, int64_t dim, const float *weight, float eps) {
  pool.run(rows, row_grain(dim), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) norm_row(x + r * dim, dim, weight, eps, x + r * dim);
  });
}

void add_rmsnorm(ThreadPool &pool, float *residual, const float *x, int64_t rows, int64_t dim, const float *weight,
                 float eps, float *out) {
  pool.run(rows, row_grain(dim), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      float *res = residual + r * dim;
      const float *xr = x + r * dim;
      for (int64_t i = 0; i < dim; ++i) res[i] += xr[i];
      norm_row(res, dim, weight, eps, out + r * dim);
    }
  });
}

// The angle pos · inv_freq is formed and reduced in double: at positions in the thousands an fp32 product is
// off by ~1e-4 rad, which is visible against a float64 reference. cos/sin are computed once per token and
// reused by every head.
void rope(ThreadPool &pool, float *x, int64_t T, int32_t n_heads, int32_t head_dim, const int32_t *pos,
          const float *inv_freq, float attn_scale, int32_t rotary_dims) {
  const int half = (rotary_dims > 0 ? rotary_dims : head_dim) / 2;
  pool.run(T, row_grain(int64_t(n_heads) * head_dim), [&](int64_t t0, int64_t t1, int) {
    thread_local Scratch cs;
    float *c = cs.floats(size_t(2 * half)), *s = c + half;
    for (int64_t t = t0; t < t1; ++t) {
      for (int i = 0; i < half; ++i) {
        double a = double(pos[t]) * double(inv_freq[i]);
        c[i] = float(std::cos(a) * attn_scale);
        s[i] = float(std::sin(a) * attn_scale);
      }
      for (int h = 0; h < n_heads; ++h) {
        float *v = x + (t * n_heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

// Two layouts: separate gate(T, F) and up(T, F), or one gate_up(T, 2F) buffer passed as gate = gate_up,
// up = gate_up + F, whose rows are then 2F apart. The second is recognised by exactly that pointer relation,
// which separate (T, F) buffers cannot have when T > 1 (they would overlap); at T = 1 both read the same.
void silu_mul(ThreadPool &pool, const float *gate, const float *up, int64_t T, int64_t F, float *out) {
  const int64_t ld = (up == gate + F) ? 2 * F : F;
  pool.run(T, row_grain(F), [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const float *g = gate + t * ld, *u = up + t * ld;
      float *o = out + t * F;
      for (int64_t i = 0; i < F; ++i) o[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
    }
  });
}

// A negative slot marks a token whose K/V is not kept (padding); it is skipped.
void kv_store(const float *k, const float *v, int64_t T, int32_t n_kv_heads, int32_t head_dim, const int32_t *slot,
              float *k_cache, float *v_cache) {
  const int64_t row = int64_t(n_kv_heads) * head_dim;
  for (int64_t t = 0; t < T; ++t) {
    if (slot[t] < 0) continue;
    std::memcpy(k_cache + int64_t(slot[t]) * row, k + t * row, size_t(row) * sizeof(float));
    std::memcpy(v_cache + int64_t(slot[t]) * row, v + t * row, size_t(row) * sizeof(float));
  }
}

}  // namespace vt::cpu
