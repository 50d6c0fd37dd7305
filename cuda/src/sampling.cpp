// Host sampling over one logits row. The cost is in the vocabulary (up to ~152k), so every full pass is
// written with portable 4-lane vectors (GCC/Clang vector extensions: SSE2 on x86-64, NEON on arm64), the
// exp-bound one also with AVX2+FMA chosen at run time, and the descending order that top-p and the
// inverse-CDF draw are defined on is never built for the whole vocabulary: the candidates are the tokens above
// a probability level whose mass is known to be enough (usually a few dozen), and the token where the
// cumulative mass crosses its target is found by bucketing the candidates' mass by logit and sorting only the
// bucket that holds the crossing.
#include "sampling.h"
#include "tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace vt {

// ---- Rng: xoshiro256** (Blackman & Vigna), state filled from the seed by splitmix64 ----

static inline uint64_t rotl(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

Rng::Rng(uint64_t seed) {
  for (uint64_t &s : s_) {
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    s = z ^ (z >> 31);
  }
}

uint64_t Rng::next() {
  const uint64_t out = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return out;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kMaxTop = 20;      // SampleResult::top_ids capacity
constexpr int kHeapTopK = 4096;  // top-k up to this uses a heap pass and then touches only its k tokens

using f4 = float __attribute__((vector_size(16)));
using i4 = int32_t __attribute__((vector_size(16)));
using d2 = double __attribute__((vector_size(16)));

inline f4 splat(float a) { return f4{a, a, a, a}; }
// Four floats from x[i..n), the lanes past n read as -inf (they then weigh nothing and win nothing).
inline f4 load4(const float *x, int32_t i, int32_t n) {
  f4 v;
  if (i + 4 <= n) {
    std::memcpy(&v, x + i, sizeof v);
  } else {
    v = splat(-kInf);
    for (int32_t j = 0; i + j < n; ++j) v[j] = x[i + j];
  }
  return v;
}
inline void store4(float *y, int32_t i, int32_t n, f4 v) {
  if (i + 4 <= n) std::memcpy(y + i, &v, sizeof v);
  else for (int32_t j = 0; i + j < n; ++j) y[i + j] = v[j];
}

// exp(s) for s <= 0, ~2e-7 relative error, exactly 1 at s = 0. Lanes below -87 (near FLT_MIN), -inf and NaN
// give exactly 0, so a NaN or -inf logit carries no probability anywhere.
inline f4 exp4(f4 s) {
  const i4 ok = s >= splat(-87.f);
  s = s > splat(-87.f) ? s : splat(-87.f);
  const f4 magic = splat(12582912.f);  // 1.5 * 2^23: adding it rounds to an integer kept in the low bits
  const f4 t = s * splat(1.44269504f) + magic, n = t - magic;
  f4 r = s - n * splat(0.693359375f);  // s - n ln2, ln2 split in two so the first product is exact
  r = r - n * splat(-2.12194440e-4f);
  // e^r on |r| <= ln2/2: a degree-5 polynomial fitted for relative error (< 1e-7), constant term exactly 1.
  f4 q = splat(8.29031412e-3f) * r + splat(4.18979302e-2f);
  q = q * r + splat(0.166676357f);
  q = q * r + splat(0.499991506f);
  q = q * r + splat(0.999999702f);
  q = q * r + splat(1.f);
  const i4 pow2 = (((i4)t - (i4)magic) + 127) << 23;
  return (f4)((i4)(q * (f4)pow2) & ok);
}

inline void add_d(d2 &a, d2 &b, f4 v) {
  a += d2{v[0], v[1]};
  b += d2{v[2], v[3]};
}

inline float hmax(f4 v) { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }
inline f4 vmax(f4 a, f4 m) { return a > m ? a : m; }  // NaN in a never wins

// Largest value of x[i..i+64) (all present); NaN never wins (each lane starts at -inf, never at a NaN).
inline float block_max(const float *x, int32_t i, int32_t n) {
  f4 m[4];
  for (int q = 0; q < 4; ++q) m[q] = vmax(load4(x, i + 4 * q, n), splat(-kInf));
  for (int j = 16; j < 64; j += 16)
    for (int q = 0; q < 4; ++q) m[q] = vmax(load4(x, i + j + 4 * q, n), m[q]);
  return hmax(vmax(vmax(m[0], m[1]), vmax(m[2], m[3])));
}

// Largest value; NaN never wins.
float max_logit(const float *x, int32_t n) {
  float m = -kInf;
  int32_t i = 0;
  for (; i + 64 <= n; i += 64) m = std::max(m, block_max(x, i, n));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// First index of the largest value, in one pass over memory: blocks of 64 are reduced with vector max, and
// only a block that raises the maximum is scanned again (from L1) for where. All -inf/NaN gives 0.
int32_t argmax(const float *x, int32_t n) {
  float best = -kInf;
  int32_t id = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const float m = block_max(x, i, n);
    if (m > best) {
      best = m;
      for (id = i; x[id] != m; ++id) {}
    }
  }
  for (; i < n; ++i)
    if (x[i] > best) best = x[i], id = i;
  return id;
}

// Calls on(i) for every i (ascending) with x[i] > thr; on() may raise thr. Blocks of 64 with nothing above
// thr are skipped after a vector max, which is nearly all of them once thr is near the top of the vocabulary.
template <class On>
void for_each_above(const float *x, int32_t n, const float &thr, On &&on) {
  int32_t i = 0;
  for (; i + 64 <= n; i += 64)
    if (block_max(x, i, n) > thr)
      for (int32_t j = i; j < i + 64; ++j)
        if (x[j] > thr) on(j);
  for (; i < n; ++i)
    if (x[i] > thr) on(i);
}

// The n (<= kMaxTop) best tokens by (value desc, id asc), NaN as -inf, into vals/ids.
void top_list(const float *x, int32_t vocab, int n, float *vals, int32_t *ids) {
  auto insert = [&](int len, float v, int32_t id) {  // into vals[0..len), dropping vals[len - 1] when full
    int j = len - 1;
    for (; j > 0 && vals[j - 1] < v; --j) vals[j] = vals[j - 1], ids[j] = ids[j - 1];
    vals[j] = v, ids[j] = id;
  };
  for (int j = 0; j < n; ++j) insert(j + 1, x[j] == x[j] ? x[j] : -kInf, j);
  float thr = vals[n - 1];
  for_each_above(x + n, vocab - n, thr, [&](int32_t i) {
    insert(n, x[n + i], n + i);
    thr = vals[n - 1];
  });
}

// Value of the k-th largest logit (counting repeats), NaN as -inf, via a min-heap of k values in heap[].
float kth_largest(const float *x, int32_t vocab, int32_t k, float *heap) {
  for (int32_t j = 0; j < k; ++j) heap[j] = x[j] == x[j] ? x[j] : -kInf;
  std::make_heap(heap, heap + k, std::greater<float>());
  float thr = heap[0];
  for_each_above(x + k, vocab - k, thr, [&](int32_t i) {
    int32_t h = 0;  // replace the root by the new value and sift it down
    const float v = x[k + i];
    for (;;) {
      int32_t c = 2 * h + 1;
      if (c >= k) break;
      if (c + 1 < k && heap[c + 1] < heap[c]) ++c;
      if (!(heap[c] < v)) break;
      heap[h] = heap[c], h = c;
    }
    heap[h] = v;
    thr = heap[0];
  });
  return thr;
}

// Probability levels (relative to the top token) at which candidates for top-p or a plain draw are looked
// for first: a level holding too little mass costs one pass that skips nearly every block.
constexpr int kLevels = 2;
constexpr float kLevel[kLevels] = {0x1p-10f, 0x1p-20f};

#if defined(__x86_64__)
// The exp-bound pass with 8 lanes and FMA where the CPU has AVX2 (the baseline build has SSE2 only), as the
// CPU backend does; VT_CPU_ISA=scalar keeps the portable path, for tests and comparisons.
#define VT_AVX2 __attribute__((target("avx2,fma")))

bool use_avx2() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_isa_env() != "scalar";
  }();
  return yes;
}

VT_AVX2 inline __m256 exp8(__m256 s) {  // exp4's algorithm and constants, fused
  const __m256 lowest = _mm256_set1_ps(-87.f), magic = _mm256_set1_ps(12582912.f);
  const __m256 ok = _mm256_cmp_ps(s, lowest, _CMP_GE_OQ);
  s = _mm256_max_ps(s, lowest);  // NaN -> -87, then masked to 0
  const __m256 t = _mm256_fmadd_ps(s, _mm256_set1_ps(1.44269504f), magic), n = _mm256_sub_ps(t, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), s);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(8.29031412e-3f), r, _mm256_set1_ps(4.18979302e-2f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.166676357f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.499991506f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.999999702f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.f));
  const __m256i k = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(magic));
  const __m256 pow2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
  return _mm256_and_ps(_mm256_mul_ps(q, pow2), ok);
}

VT_AVX2 double softmax_mass_avx2(const float *x, int32_t n, float mx, float inv_t, float floor, float *e) {
  const __m256 m = _mm256_set1_ps(mx), it = _mm256_set1_ps(inv_t), fl = _mm256_set1_ps(floor);
  __m256d z0 = _mm256_setzero_pd(), z1 = z0;
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256 ea = _mm256_and_ps(exp8(_mm256_mul_ps(_mm256_sub_ps(a, m), it)), _mm256_cmp_ps(a, fl, _CMP_GE_OQ));
    const __m256 eb = _mm256_and_ps(exp8(_mm256_mul_ps(_mm256_sub_ps(b, m), it)), _mm256_cmp_ps(b, fl, _CMP_GE_OQ));
    const __m256 p = _mm256_add_ps(ea, eb);
    z0 = _mm256_add_pd(z0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    z1 = _mm256_add_pd(z1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    if (e) _mm256_storeu_ps(e + i, ea), _mm256_storeu_ps(e + i + 8, eb);
  }
  alignas(32) double zs[4];
  _mm256_store_pd(zs, _mm256_add_pd(z0, z1));
  double z = (zs[0] + zs[1]) + (zs[2] + zs[3]);
  for (; i < n; i += 4) {  // the tail through the portable exp
    const f4 v = load4(x, i, n), q = (f4)((i4)exp4((v - splat(mx)) * splat(inv_t)) & (v >= splat(floor)));
    z += double(q[0]) + q[1] + q[2] + q[3];
    if (e) store4(e, i, n, q);
  }
  return z;
}
#endif

// Sum of exp((x[i] - mx) * inv_t) over the tokens with x[i] >= floor, accumulated in double (each pair of
// lanes added in float first); each term also into e[i] when e is given.
double softmax_mass(const float *x, int32_t n, float mx, float inv_t, float floor, float *e) {
#if defined(__x86_64__)
  if (use_avx2()) return softmax_mass_avx2(x, n, mx, inv_t, floor, e);
#endif
  d2 z0{0, 0}, z1{0, 0};
  for (int32_t i = 0; i < n; i += 8) {
    const f4 a = load4(x, i, n), b = load4(x, i + 4, n);
    const f4 ea = (f4)((i4)exp4((a - splat(mx)) * splat(inv_t)) & (a >= splat(floor)));
    const f4 eb = (f4)((i4)exp4((b - splat(mx)) * splat(inv_t)) & (b >= splat(floor)));
    add_d(z0, z1, ea + eb);
    if (e) store4(e, i, n, ea), store4(e, i + 4, n, eb);
  }
  const d2 z = z0 + z1;
  return z[0] + z[1];
}

// log of the softmax normaliser of the raw logits: max + log(sum exp(x - max)).
double log_normaliser(const float *x, int32_t n, float mx) {
  return double(mx) + std::log(softmax_mass(x, n, mx, 1.f, -kInf, nullptr));
}

// Candidate tokens are lists of ids; x are their logits (finite), e their unnormalised probabilities.
struct Dist {
  const float *x;
  const float *e;
  // Descending probability, ties to the lower id: the order top-p and the draw walk in.
  bool before(int32_t a, int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
  int32_t last(const int32_t *ids, int32_t n) const {  // the last of ids[0..n) in that order
    int32_t r = ids[0];
    for (int32_t j = 1; j < n; ++j) r = before(r, ids[j]) ? ids[j] : r;
    return r;
  }
};

// Finds, among the tokens ids[0..n) (any order, logits within [lo, hi]; lo may be a rough guess), the first
// in walk order at which the cumulative mass reaches target (cum >= target, or > target when strict);
// returns its id and the cumulative mass through it, or -1 when the whole mass falls short. Large sets are
// narrowed without sorting: the mass per logit bucket (1024 linear buckets over [lo, hi]) says which bucket
// holds the crossing, and only that bucket's tokens go on into work[] (re-bucketed over their own range while
// still large, then sorted). ids[] is left as it was.
int32_t crossing(const Dist &d, const int32_t *ids, int32_t n, float lo, float hi, double target, bool strict,
                 int32_t *work, double *cum) {
  auto reached = [&](double c) { return strict ? c > target : c >= target; };
  constexpr int kBuckets = 1024;
  double acc = 0;       // mass of the tokens known to come before those left
  bool inside = false;  // the crossing is known to be among those left, whatever rounding the walk sees
  const int32_t *src = ids;
  for (int depth = 0; n > 256 && depth < 4; ++depth) {
    if (depth > 0) {
      lo = hi = d.x[src[0]];
      for (int32_t j = 1; j < n; ++j) lo = std::min(lo, d.x[src[j]]), hi = std::max(hi, d.x[src[j]]);
    }
    const float scale = (kBuckets - 0.01f) / (hi - lo);
    // all tied (only the ids order them; hi - lo is -0 when -0 and +0 meet), or a range too narrow for floats
    if (!(scale > 0.f && scale < kInf)) break;
    auto bucket = [&](int32_t i) {  // 0 = highest logits; clamped, as lo may be a guess
      const float b = (hi - d.x[i]) * scale;
      return b < kBuckets - 1 ? int(std::max(b, 0.f)) : kBuckets - 1;
    };
    double mass[kBuckets] = {};
    for (int32_t j = 0; j < n; ++j) mass[bucket(src[j])] += d.e[src[j]];
    int b = 0;
    for (; b < kBuckets && !reached(acc + mass[b]); ++b) acc += mass[b];
    if (b == kBuckets) {  // short; when inside, only by rounding: the last token left
      if (!inside) return -1;
      return *cum = acc, d.last(src, n);
    }
    int32_t k = 0;
    for (int32_t j = 0; j < n; ++j) {
      const int32_t i = src[j];
      work[k] = i, k += bucket(i) == b;
    }
    src = work, n = k, inside = true;
  }
  if (src != work) std::copy(src, src + n, work);
  std::sort(work, work + n, [&](int32_t a, int32_t b) { return d.before(a, b); });
  for (int32_t j = 0; j < n; ++j)
    if (reached(acc += d.e[work[j]])) return *cum = acc, work[j];
  if (inside && n > 0) return *cum = acc, work[n - 1];
  return -1;
}

struct Truncation {
  bool top_p_on;
  double top_p;
  float min_p;  // 0 = off; else a probability relative to the top token, <= 1
};

// Candidates ids[0..n) (logits within [lo, hi]) all pass min-p, and their walk-order prefix holds the top-p
// nucleus, if any; mass is their sum and z_ref the sum top-p is relative to. Cuts the nucleus and draws.
int32_t draw_from(const Dist &d, const int32_t *ids, int32_t n, float lo, float hi, double mass, double z_ref,
                  const Truncation &tr, double u, int32_t *work) {
  int32_t cut = -1;  // the nucleus's last token; the kept mass is then the cumulative mass through it
  if (tr.top_p_on) cut = crossing(d, ids, n, lo, hi, tr.top_p * z_ref, false, work, &mass);
  double unused;
  const int32_t r = crossing(d, ids, n, lo, hi, u * mass, true, work, &unused);
  if (r >= 0 && (cut < 0 || !d.before(cut, r))) return r;
  if (cut >= 0) return cut;  // rounding put u * mass at or past the nucleus's end
  return d.last(ids, n);
}

// Ids with e[i] >= level (ascending) into ids; returns the count, and their mass and smallest e.
int32_t collect(const float *e, int32_t n, float level, int32_t *ids, double &mass, float &e_min) {
  d2 z0{0, 0}, z1{0, 0};
  f4 mn = splat(kInf);
  const f4 t = splat(level);
  int32_t c = 0;
  for (int32_t i = 0; i < n; i += 64) {
    const int32_t end = std::min(i + 64, n);
    if (end - i == 64 && !(block_max(e, i, n) >= level)) continue;
    for (int32_t j = i; j < end; j += 4) {
      const f4 v = load4(e, j, n);
      const i4 m = v >= t;
      add_d(z0, z1, (f4)((i4)v & m));
      mn = (m & (v < mn)) ? v : mn;
    }
    for (int32_t j = i; j < end; ++j) ids[c] = j, c += e[j] >= level;
  }
  const d2 z = z0 + z1;
  mass = z[0] + z[1];
  e_min = -hmax(-mn);
  return c;
}

int32_t sample_token(const float *x, int32_t vocab, float mx, const SamplingParams &p, double u,
                     SamplerScratch &sc, double *log_z_raw) {
  const float inv_t = 1.f / p.temperature, temp = p.temperature;
  if (!(inv_t < kInf)) return argmax(x, vocab);  // a denormal temperature: the limit is greedy
  const Truncation tr{p.top_p < 1.f, std::max(double(p.top_p), 0.0), p.min_p > 0.f ? std::min(p.min_p, 1.f) : 0.f};
  float *e = sc.probs.data();
  int32_t *ids = sc.idx.data(), *work = ids + vocab;
  const Dist d{x, e};
  const bool top_k_on = p.top_k > 0 && p.top_k < vocab;

  if (top_k_on && p.top_k <= kHeapTopK) {
    // Only the top-k tokens (and any tied with the k-th: TopKLogitsWarper keeps scores >= the k-th) matter.
    const float kth = kth_largest(x, vocab, p.top_k, e);
    int32_t n = 0;
    for_each_above(x, vocab, std::nextafter(kth, -kInf), [&](int32_t i) { ids[n++] = i; });
    double z = 0, mass = 0;  // z: all of the top-k, for top-p; mass: what min-p keeps of it
    int32_t k = 0;
    for (int32_t j = 0; j < n; j += 4) {
      f4 v = splat(-kInf);
      for (int32_t l = 0; l < 4 && j + l < n; ++l) v[l] = x[ids[j + l]];
      const f4 q = exp4((v - splat(mx)) * splat(inv_t));
      for (int32_t l = 0; l < 4 && j + l < n; ++l) {
        z += q[l];
        if (q[l] > 0 && q[l] >= tr.min_p) e[ids[j + l]] = q[l], mass += q[l], ids[k++] = ids[j + l];
      }
    }
    return draw_from(d, ids, k, kth, mx, mass, z, tr, u, work);
  }

  float floor = -kInf;  // a large top-k: its threshold by selection on a copy, then the full-vocabulary path
  if (top_k_on) {
    for (int32_t i = 0; i < vocab; ++i) e[i] = x[i] == x[i] ? x[i] : -kInf;
    std::nth_element(e, e + p.top_k - 1, e + vocab, std::greater<float>());
    floor = e[p.top_k - 1];
  }
  const double z = softmax_mass(x, vocab, mx, inv_t, floor, e);
  if (inv_t == 1.f && !top_k_on && log_z_raw) *log_z_raw = double(mx) + std::log(z);

  // The candidates: every token with e >= level and min_p; lo: a guess at their lowest logit.
  double mass;
  int32_t n;
  float lo;
  auto gather = [&](float level) {
    float e_min;
    n = collect(e, vocab, std::max(level, tr.min_p), ids, mass, e_min);
    lo = std::max(mx + std::log(e_min) * temp, floor);
  };
  // Top-p needs the tokens down to where the mass reaches top_p * z; a plain draw those down to u * z.
  const double target = tr.top_p_on ? tr.top_p * z : u * z;
  for (int l = !tr.top_p_on && tr.min_p > 0 ? kLevels : 0;; ++l) {  // min-p alone: all it keeps at once
    const float level = l < kLevels ? kLevel[l] : std::numeric_limits<float>::denorm_min();
    gather(level);
    const bool enough = tr.top_p_on ? mass >= target : mass > target;
    if (enough || tr.min_p >= level || l >= kLevels) break;  // nothing below min_p is kept anyway
  }
  if (tr.top_p_on || tr.min_p > 0) return draw_from(d, ids, n, lo, mx, mass, z, tr, u, work);
  double unused;
  const int32_t r = crossing(d, ids, n, lo, mx, target, true, work, &unused);
  return r >= 0 ? r : d.last(ids, n);  // short only by rounding
}

// Every token whose logit is +inf shares the mass equally, the rest get none (the limit of softmax).
SampleResult sample_infinite(const float *logits, int32_t vocab, const SamplingParams &p, double u,
                             SamplerScratch &sc);

SampleResult sample_with(const float *x, int32_t vocab, const SamplingParams &p, double u, SamplerScratch &sc) {
  SampleResult res;
  const int n_top = p.logprobs > 0 ? std::min({p.logprobs, kMaxTop, vocab}) : 0;
  const bool greedy = !(p.temperature > 0.f);
  float mx;
  if (n_top > 0) {
    top_list(x, vocab, n_top, res.top_logprobs, res.top_ids);
    res.n_top = n_top;
    mx = res.top_logprobs[0];
  } else {
    mx = max_logit(x, vocab);
  }
  if (mx == kInf) return sample_infinite(x, vocab, p, u, sc);
  if (mx == -kInf) {  // every logit -inf or NaN: all tie, so the argmax rule's token 0, and equal logprobs
    res.token = 0;
    res.logprob = float(-std::log(double(vocab)));
    for (int j = 0; j < n_top; ++j) res.top_logprobs[j] = res.logprob;
    return res;
  }
  double log_z = std::numeric_limits<double>::quiet_NaN();
  if (greedy) {
    res.token = res.top_ids[0];  // greedy reaches here only with logprobs
  } else {
    if (sc.probs.size() < size_t(vocab)) sc.probs.resize(vocab);
    if (sc.idx.size() < 2 * size_t(vocab)) sc.idx.resize(2 * size_t(vocab));  // ids, then positions
    res.token = sample_token(x, vocab, mx, p, u, sc, n_top > 0 ? &log_z : nullptr);
  }
  if (n_top > 0) {
    if (std::isnan(log_z)) log_z = log_normaliser(x, vocab, mx);
    res.logprob = float(double(x[res.token]) - log_z);
    for (int j = 0; j < n_top; ++j) res.top_logprobs[j] = float(double(res.top_logprobs[j]) - log_z);
  }
  return res;
}

SampleResult sample_infinite(const float *logits, int32_t vocab, const SamplingParams &p, double u,
                             SamplerScratch &sc) {
  std::vector<float> x(vocab);  // rare enough that allocating is fine
  for (int32_t i = 0; i < vocab; ++i) x[i] = logits[i] == kInf ? 0.f : -kInf;
  return sample_with(x.data(), vocab, p, u, sc);
}

}  // namespace

SampleResult sample(const float *logits, int32_t vocab, const SamplingParams &p, Rng &rng, SamplerScratch &scratch) {
  if (!logits || vocab <= 0) return SampleResult{};  // no valid id exists: token stays -1
  if (!(p.temperature > 0.f) && p.logprobs <= 0) {
    SampleResult res;
    res.token = argmax(logits, vocab);
    return res;
  }
  const double u = p.temperature > 0.f ? rng.uniform() : 0.0;  // exactly one draw per sampled step
  return sample_with(logits, vocab, p, u, scratch);
}

}  // namespace vt
