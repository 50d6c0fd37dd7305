// Gated DeltaNet ops (contracts in gated_delta.h). They are also the reference the CUDA kernels are written
// from, so they follow the definitions step by step rather than any blocking tricks; the delta rule's inner
// loops go through the per-ISA attention kernels, the rest is plain C++ over contiguous rows.
#include "backend/cpu/gated_delta.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/scratch.h"

namespace vt::cpu {

namespace {

// Auto's choice (see DeltaRulePath): runs of this many rows or more take the chunked form.
constexpr int32_t kChunkedFromRows = 2;

// transformers' l2norm eps (the FLA kernels' too): x · rsqrt(Σx² + eps).
constexpr float kL2NormEps = 1e-6f;

float silu(float x) { return x / (1.f + std::exp(-x)); }

// torch.nn.functional.softplus with its default threshold: above 20 it returns x (log1p(exp(x)) == x in fp32).
float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// Eight partial sums: no loop-carried dependency on one register, and a shape the vectoriser recognises.
float sum_squares(const float *x, int64_t n) {
  float s[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += x[i + k] * x[i + k];
  for (; i < n; ++i) s[0] += x[i] * x[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// ---------------------------------------------------------------------------------------------------------
// Conv: work is split over blocks of channels, each block walking every sequence, so the split is even
// whatever the sequence lengths (the per-element work is only W multiply-adds).
constexpr int64_t kConvBlock = 64;

void conv_block(const float *x, const RecurrentBatch &b, int64_t C, int32_t W, const float *weight, float *conv_state,
                int64_t slot_stride, float *out, int64_t c0, int64_t c1) {
  const int32_t hist = W - 1;  // rows of history a sequence carries
  for (int32_t s = 0; s < b.n_seqs; ++s) {
    const int32_t start = b.seq_start[s], n = b.seq_start[s + 1] - start;
    const bool fresh = b.fresh && b.fresh[s];
    float *state = conv_state + int64_t(b.slot[s]) * slot_stride;
    // Row p of the sequence's input; p < 0 reaches into the history (nullptr: zeros).
    auto input_row = [&](int32_t p) -> const float * {
      if (p >= 0) return x + int64_t(start + p) * C;
      return fresh ? nullptr : state + int64_t(hist + p) * C;
    };
    for (int32_t t = 0; t < n; ++t) {
      float acc[kConvBlock] = {};
      for (int32_t j = 0; j < W; ++j) {
        const float *in = input_row(t - hist + j);
        if (!in) continue;
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += weight[c * W + j] * in[c];
      }
      float *o = out + int64_t(start + t) * C;
      for (int64_t c = c0; c < c1; ++c) o[c] = silu(acc[c - c0]);
    }
    // New history: rows n .. n + hist - 1 of [old history; this step's rows]. Row r is read from position
    // n + r >= r, which this ascending loop has not overwritten yet, so it works in place.
    for (int32_t r = 0; r < hist; ++r) {
      const float *in = input_row(n + r - hist);
      float *dst = state + int64_t(r) * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] = in ? in[c] : 0.f;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Delta rule: one work item is one (sequence, value head); its state S (Dk, Dv) is private to the item.
//
// The inner loops are the two that paged attention has too, taken from its per-ISA kernels
// (attention_kernels.h): dot products of one vector with several rows (`scores`), and a weighted sum of
// rows into a vector (`accumulate`). Sᵀx for x of Dk is the weighted sum of S's rows with weights x.
struct RuleJob {
  const float *qkv, *g, *beta;
  const RecurrentBatch *b;
  GdnGeometry geo;
  float *state;
  int64_t slot_stride;
  float *out;
  const AttentionKernels *kern;
};

// Row t's q (normalised, scaled by 1/sqrt(Dk)) and k (normalised) of key head kh, into qn and kn (Dk each).
void load_qk(const RuleJob &j, int64_t t, int32_t kh, float *qn, float *kn) {
  const int32_t dk = j.geo.k_dim;
  const float *q = j.qkv + t * j.geo.qkv_dim() + int64_t(kh) * dk;
  const float *k = q + int64_t(j.geo.n_k_heads) * dk;
  const float qs = 1.f / std::sqrt(sum_squares(q, dk) + kL2NormEps) / std::sqrt(float(dk));
  const float ks = 1.f / std::sqrt(sum_squares(k, dk) + kL2NormEps);
  for (int32_t i = 0; i < dk; ++i) qn[i] = q[i] * qs, kn[i] = k[i] * ks;
}

const float *value_row(const RuleJob &j, int64_t t, int32_t h) {
  return j.qkv + t * j.geo.qkv_dim() + 2 * int64_t(j.geo.n_k_heads) * j.geo.k_dim + int64_t(h) * j.geo.v_dim;
}

float *out_row(const RuleJob &j, int64_t t, int32_t h) {
  return j.out + (t * j.geo.n_v_heads + h) * int64_t(j.geo.v_dim);
}

// Row pointers of a matrix m of n rows of `len` floats into dst (the kernels take rows through pointers).
const float *const *rows_of(const float **dst, const float *m, int32_t n, int64_t len) {
  for (int32_t i = 0; i < n; ++i) dst[i] = m + i * len;
  return dst;
}

// Room for n pointers in a thread's buffer (grown, never shrunk: no allocation once warm).
const float **pointer_buffer(size_t n) {
  thread_local std::vector<const float *> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Token by token, as the definition reads. The decay is folded in: Sᵀk of the decayed state is
// exp(g) · Sᵀk of the old one, and the update scales each row by exp(g) as it adds k_r · delta.
void recurrent_head(const RuleJob &j, int32_t t0, int32_t t1, int32_t h, int32_t kh, float *S) {
  const int32_t dk = j.geo.k_dim, dv = j.geo.v_dim;
  const AttentionKernels &kern = *j.kern;
  thread_local Scratch scratch;
  float *qn = scratch.floats(size_t(2 * dk + dv)), *kn = qn + dk, *delta = kn + dk;
  const float *const *s_rows = rows_of(pointer_buffer(size_t(dk)), S, dk, dv);
  const float *delta_row = delta;
  for (int64_t t = t0; t < t1; ++t) {
    load_qk(j, t, kh, qn, kn);
    const float decay = std::exp(j.g[t * j.geo.n_v_heads + h]), beta = j.beta[t * j.geo.n_v_heads + h];
    const float *v = value_row(j, t, h);
    std::fill(delta, delta + dv, 0.f);
    kern.accumulate(kn, s_rows, dk, dv, 1.f, delta);  // Sᵀk
    for (int32_t c = 0; c < dv; ++c) delta[c] = beta * (v[c] - decay * delta[c]);
    for (int32_t r = 0; r < dk; ++r) kern.accumulate(kn + r, &delta_row, 1, dv, decay, S + int64_t(r) * dv);
    float *o = out_row(j, t, h);
    std::fill(o, o + dv, 0.f);
    kern.accumulate(qn, s_rows, dk, dv, 1.f, o);  // Sᵀq
  }
}

// The same recurrence, kDeltaRuleChunk rows at a time. Within a chunk, with γ_i the cumulative log decay up to
// row i and S0 the state at the chunk's start, unrolling the recurrence gives
//   δ_i = beta_i (v_i - e^{γ_i} S0ᵀk_i) - Σ_{j<i} beta_i e^{γ_i-γ_j} (k_i·k_j) δ_j    (a unit lower-triangular
//                                                                                    system, forward substitution)
//   o_i = e^{γ_i} S0ᵀq_i + Σ_{j<=i} e^{γ_i-γ_j} (q_i·k_j) δ_j
//   S_end = e^{γ_last} S0 + Σ_j e^{γ_last-γ_j} k_j ⊗ δ_j
// where δ_i is the recurrent form's beta_t (v_t - Sᵀk_t). The state is updated once per chunk instead of per
// row, and every decay factor is exp of a difference <= 0, so nothing overflows however strong the decays.
// (transformers' torch_chunk_gated_delta_rule solves the same system, for v and k separately.)
void chunked_head(const RuleJob &j, int32_t t0, int32_t t1, int32_t h, int32_t kh, float *S) {
  const int32_t dk = j.geo.k_dim, dv = j.geo.v_dim, L = kDeltaRuleChunk;
  const AttentionKernels &kern = *j.kern;
  thread_local Scratch scratch;
  // qn, kn (L, Dk) | delta (L, Dv) | gam, a, to_end (L)
  float *qn = scratch.floats(size_t(L) * (2 * dk + dv + 3)), *kn = qn + int64_t(L) * dk;
  float *delta = kn + int64_t(L) * dk, *gam = delta + int64_t(L) * dv, *a = gam + L, *to_end = a + L;
  const float **ptrs = pointer_buffer(size_t(dk + 2 * L));
  const float *const *s_rows = rows_of(ptrs, S, dk, dv);
  const float *const *k_rows = rows_of(ptrs + dk, kn, L, dk);
  const float *const *d_rows = rows_of(ptrs + dk + L, delta, L, dv);
  for (int32_t c0 = t0; c0 < t1; c0 += L) {
    const int32_t n = std::min(L, t1 - c0);
    for (int32_t i = 0; i < n; ++i) {
      load_qk(j, c0 + i, kh, qn + int64_t(i) * dk, kn + int64_t(i) * dk);
      gam[i] = (i ? gam[i - 1] : 0.f) + j.g[int64_t(c0 + i) * j.geo.n_v_heads + h];
    }
    // What the chunk-start state gives each row: delta_i's right-hand side, and S0ᵀq_i into o_i.
    for (int32_t i = 0; i < n; ++i) {
      const float e = std::exp(gam[i]), beta = j.beta[int64_t(c0 + i) * j.geo.n_v_heads + h];
      const float *v = value_row(j, c0 + i, h);
      float *d = delta + int64_t(i) * dv, *o = out_row(j, c0 + i, h);
      std::fill(d, d + dv, 0.f);
      std::fill(o, o + dv, 0.f);
      kern.accumulate(kn + int64_t(i) * dk, s_rows, dk, dv, 1.f, d);
      kern.accumulate(qn + int64_t(i) * dk, s_rows, dk, dv, 1.f, o);
      for (int32_t c = 0; c < dv; ++c) d[c] = beta * (v[c] - e * d[c]);
    }
    // Forward substitution: δ_i depends on the δ_j before it in the chunk.
    for (int32_t i = 1; i < n; ++i) {
      const float beta = j.beta[int64_t(c0 + i) * j.geo.n_v_heads + h];
      kern.scores(kn + int64_t(i) * dk, k_rows, i, dk, a);
      for (int32_t jj = 0; jj < i; ++jj) a[jj] *= -beta * std::exp(gam[i] - gam[jj]);
      kern.accumulate(a, d_rows, i, dv, 1.f, delta + int64_t(i) * dv);
    }
    // Outputs: the decayed read of S0 plus what rows j <= i of the chunk wrote, read by q_i.
    for (int32_t i = 0; i < n; ++i) {
      kern.scores(qn + int64_t(i) * dk, k_rows, i + 1, dk, a);
      for (int32_t jj = 0; jj <= i; ++jj) a[jj] *= std::exp(gam[i] - gam[jj]);
      kern.accumulate(a, d_rows, i + 1, dv, std::exp(gam[i]), out_row(j, c0 + i, h));
    }
    // The state at the chunk's end, row by row: S_r = e^{γ_last} S0_r + Σ_j e^{γ_last-γ_j} k_j[r] δ_j.
    for (int32_t jj = 0; jj < n; ++jj) to_end[jj] = std::exp(gam[n - 1] - gam[jj]);
    const float e_last = std::exp(gam[n - 1]);
    for (int32_t r = 0; r < dk; ++r) {
      for (int32_t jj = 0; jj < n; ++jj) a[jj] = to_end[jj] * kn[int64_t(jj) * dk + r];
      kern.accumulate(a, d_rows, n, dv, e_last, S + int64_t(r) * dv);
    }
  }
}

void rule_item(const RuleJob &j, int32_t s, int32_t h, DeltaRulePath path) {
  const RecurrentBatch &b = *j.b;
  const int32_t t0 = b.seq_start[s], t1 = b.seq_start[s + 1];
  const int32_t kh = h / (j.geo.n_v_heads / j.geo.n_k_heads);
  const int64_t head_floats = int64_t(j.geo.k_dim) * j.geo.v_dim;
  float *S = j.state + int64_t(b.slot[s]) * j.slot_stride + h * head_floats;
  if (b.fresh && b.fresh[s]) std::fill(S, S + head_floats, 0.f);
  const bool chunked = path == DeltaRulePath::Chunked || (path == DeltaRulePath::Auto && t1 - t0 >= kChunkedFromRows);
  if (chunked)
    chunked_head(j, t0, t1, h, kh, S);
  else
    recurrent_head(j, t0, t1, h, kh, S);
}

}  // namespace

void causal_conv1d_silu(ThreadPool &pool, const float *x, const RecurrentBatch &b, int64_t C, int32_t W,
                        const float *weight, float *conv_state, int64_t slot_stride, float *out) {
  const int64_t n_blocks = (C + kConvBlock - 1) / kConvBlock;
  pool.run(n_blocks, 1, [&](int64_t b0, int64_t b1, int) {
    for (int64_t blk = b0; blk < b1; ++blk)
      conv_block(x, b, C, W, weight, conv_state, slot_stride, out, blk * kConvBlock,
                 std::min(C, (blk + 1) * kConvBlock));
  });
}

// T · Hv elements (a few thousand in a large prefill): too few to be worth waking the pool.
void gdn_gates(const float *b, const float *a, int64_t T, int32_t n_v_heads, const float *A_log, const float *dt_bias,
               float *beta, float *g) {
  for (int64_t t = 0; t < T; ++t)
    for (int32_t h = 0; h < n_v_heads; ++h) {
      const int64_t i = t * n_v_heads + h;
      beta[i] = 1.f / (1.f + std::exp(-b[i]));
      g[i] = -std::exp(A_log[h]) * softplus(a[i] + dt_bias[h]);
    }
}

// Items (sequence, value head) differ in cost by the sequence's length (a 1-row decode beside a 2000-row
// prefill), so sequences are taken longest first and items handed out one at a time from a counter.
void gated_delta_rule(ThreadPool &pool, const float *qkv, const float *g, const float *beta, const RecurrentBatch &b,
                      const GdnGeometry &geo, float *state, int64_t slot_stride, float *out, DeltaRulePath path) {
  thread_local std::vector<int32_t> order;  // reused across calls: no allocation per layer once warm
  order.resize(size_t(b.n_seqs));
  std::iota(order.begin(), order.end(), 0);
  auto len = [&](int32_t s) { return b.seq_start[s + 1] - b.seq_start[s]; };
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return len(x) > len(y); });

  const RuleJob job{qkv, g, beta, &b, geo, state, slot_stride, out, &attention_kernels(isa_active())};
  const int64_t n_items = int64_t(b.n_seqs) * geo.n_v_heads;
  const int32_t *seqs = order.data();
  std::atomic<int64_t> next{0};
  pool.run(std::min<int64_t>(pool.size(), n_items), 1, [&](int64_t, int64_t, int) {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_items;)
      rule_item(job, seqs[i / geo.n_v_heads], int32_t(i % geo.n_v_heads), path);
  });
}

void gated_rmsnorm(ThreadPool &pool, const float *x, const float *z, int64_t rows, int64_t dim, const float *weight,
                   float eps, float *out) {
  const int64_t grain = std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(1, dim));  // ~16K elements a chunk
  pool.run(rows, grain, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * dim, *zr = z + r * dim;
      const float inv = 1.f / std::sqrt(sum_squares(xr, dim) / float(dim) + eps);
      float *o = out + r * dim;
      for (int64_t i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * inv) * silu(zr[i]);
    }
  });
}

}  // namespace vt::cpu
