// Host sampling over one logits row. The expensive part is the vocabulary (up to ~152k): every full pass
// is written with portable 4-lane vectors (GCC/Clang vector extensions: SSE2 on x86-64, NEON on arm64, no
// run-time dispatch), and the sorted order of the distribution, which top-p and the inverse-CDF draw are
// defined on, is never built for the whole vocabulary: candidates are the tokens above a probability level
// whose mass is known to be enough, and a mass-weighted quickselect finds where the cumulative mass crosses
// its target without sorting even those.
#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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
inline bool any(i4 m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }
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
  s = ok ? s : splat(0.f);
  const f4 magic = splat(12582912.f);  // 1.5 * 2^23: adding it rounds to an integer kept in the low bits
  const f4 t = s * splat(1.44269504f) + magic, n = t - magic;
  f4 r = s - n * splat(0.693359375f);  // s - n ln2, ln2 split in two so the first product is exact
  r = r - n * splat(-2.12194440e-4f);
  f4 q = splat(1.f / 5040) * r + splat(1.f / 720);  // Taylor to r^7: |r| <= ln2/2 keeps the rest ~1e-7
  q = q * r + splat(1.f / 120);
  q = q * r + splat(1.f / 24);
  q = q * r + splat(1.f / 6);
  q = q * r + splat(0.5f);
  q = q * r + splat(1.f);
  q = q * r + splat(1.f);
  const i4 pow2 = (((i4)t - (i4)magic) + 127) << 23;
  return (f4)((i4)(q * (f4)pow2) & ok);
}

inline void add_d(d2 &a, d2 &b, f4 v) {
  a += d2{v[0], v[1]};
  b += d2{v[2], v[3]};
}

// Largest value; NaN never wins.
float max_logit(const float *x, int32_t n) {
  f4 m0 = splat(-kInf), m1 = m0;
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const f4 a = load4(x, i, n), b = load4(x, i + 4, n);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  for (; i < n; i += 4) {
    const f4 a = load4(x, i, n);
    m0 = a > m0 ? a : m0;
  }
  m0 = m1 > m0 ? m1 : m0;
  return std::max(std::max(m0[0], m0[1]), std::max(m0[2], m0[3]));
}

// First index of the largest value in one pass: each lane keeps its own first maximum, then the lowest index
// among the lanes holding the overall maximum wins. All -inf/NaN gives 0.
int32_t argmax(const float *x, int32_t n) {
  f4 b0 = splat(-kInf), b1 = b0;
  i4 j0 = i4{0, 0, 0, 0}, j1 = j0, at = i4{0, 1, 2, 3};
  for (int32_t i = 0; i < n; i += 8, at += 8) {
    const f4 a = load4(x, i, n), b = load4(x, i + 4, n);
    const i4 ga = a > b0, gb = b > b1;
    b0 = ga ? a : b0;
    j0 = ga ? at : j0;
    b1 = gb ? b : b1;
    j1 = gb ? at + 4 : j1;
  }
  float best = -kInf;
  int32_t id = 0;
  for (int l = 0; l < 4; ++l)
    for (auto [v, j] : {std::pair{b0[l], j0[l]}, std::pair{b1[l], j1[l]}})
      if (v > best || (v == best && j < id && v > -kInf)) best = v, id = j;
  return id;
}

// Calls on(i) for every i (ascending) with x[i] > thr; on() may raise thr. Blocks of 16 with nothing above thr
// are skipped with vector compares, which is nearly all of them once thr is near the top of the vocabulary.
template <class On>
void for_each_above(const float *x, int32_t n, const float &thr, On &&on) {
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const f4 t = splat(thr);
    const i4 m = (load4(x, i, n) > t) | (load4(x, i + 4, n) > t) | (load4(x, i + 8, n) > t) | (load4(x, i + 12, n) > t);
    if (any(m))
      for (int32_t j = i; j < i + 16; ++j)
        if (x[j] > thr) on(j);
  }
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

// log of the softmax normaliser of the raw logits: max + log(sum exp(x - max)), the sum in double.
double log_normaliser(const float *x, int32_t n, float mx) {
  d2 z0{0, 0}, z1{0, 0};
  for (int32_t i = 0; i < n; i += 4) add_d(z0, z1, exp4(load4(x, i, n) - splat(mx)));
  const d2 z = z0 + z1;
  return double(mx) + std::log(z[0] + z[1]);
}

// Tokens in descending probability with ties to the lower id: the order top-p and the draw walk in.
struct Before {
  const float *x;
  bool operator()(int32_t a, int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
};

// Among the tokens idx[0..n) (any order), finds the first one, in descending order, at which the cumulative
// mass reaches target (cum >= target, or > target when strict). Reorders idx so that idx[0..r) are exactly
// the tokens before it and returns r; returns n when the whole mass falls short. Expected O(n): a quickselect
// that recurses into the side holding the crossing, with a sort for small or badly split ranges.
int32_t cross_at(int32_t *idx, int32_t n, const float *x, const float *e, double target, bool strict) {
  const Before before{x};
  auto reached = [&](double c) { return strict ? c > target : c >= target; };
  int32_t lo = 0, hi = n, budget = 64;
  double acc = 0;  // mass of idx[0..lo)
  bool inside = false;  // the crossing is known to be in [lo, hi), whatever rounding the final walk sees
  while (hi - lo > 32 && budget-- > 0) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (before(idx[mid], idx[lo])) std::swap(idx[mid], idx[lo]);
    if (before(idx[hi - 1], idx[mid])) std::swap(idx[hi - 1], idx[mid]);
    if (before(idx[mid], idx[lo])) std::swap(idx[mid], idx[lo]);
    std::swap(idx[mid], idx[hi - 1]);  // median of three as the pivot, parked at the end
    const int32_t pivot = idx[hi - 1];
    int32_t s = lo;
    double m = 0;
    for (int32_t i = lo; i < hi - 1; ++i) {
      const int32_t t = idx[i];
      if (before(t, pivot)) m += e[t], idx[i] = idx[s], idx[s++] = t;
    }
    idx[hi - 1] = idx[s], idx[s] = pivot;
    if (reached(acc + m)) {
      hi = s, inside = true;
    } else {
      acc += m;
      if (reached(acc + e[pivot])) return s;
      acc += e[pivot], lo = s + 1;
    }
  }
  std::sort(idx + lo, idx + hi, before);
  for (int32_t i = lo; i < hi; ++i)
    if (reached(acc += e[idx[i]])) return i;
  return inside ? hi - 1 : n;
}

// Probability levels (relative to the top token) at which pass 1 measures the mass above; the candidates for
// top-p or a plain draw are the tokens above the highest level that holds enough mass.
constexpr int kLevels = 5;
constexpr float kLevel[kLevels] = {0x1p-4f, 0x1p-8f, 0x1p-12f, 0x1p-17f, 0x1p-23f};

// e[i] = exp((x[i] - mx) * inv_t) for x[i] >= floor, else 0; returns the total in double and the mass at or
// above each level (float lanes: only a guess at where to look, checked exactly afterwards).
double unnormalised_probs(const float *x, int32_t n, float mx, float inv_t, float floor, float *e,
                          float level_mass[kLevels]) {
  d2 z0{0, 0}, z1{0, 0};
  f4 lm[kLevels] = {};
  for (int32_t i = 0; i < n; i += 4) {
    const f4 v = load4(x, i, n);
    const f4 p = (f4)((i4)exp4((v - splat(mx)) * splat(inv_t)) & (v >= splat(floor)));
    store4(e, i, n, p);
    add_d(z0, z1, p);
    for (int l = 0; l < kLevels; ++l) lm[l] += (f4)((i4)p & (p >= splat(kLevel[l])));
  }
  for (int l = 0; l < kLevels; ++l) level_mass[l] = (lm[l][0] + lm[l][1]) + (lm[l][2] + lm[l][3]);
  const d2 z = z0 + z1;
  return z[0] + z[1];
}

// Ids with e[i] >= level, ascending, into idx; their exact mass into mass.
int32_t collect(const float *e, int32_t n, float level, int32_t *idx, double &mass) {
  int32_t c = 0;
  double m = 0;
  const float thr = std::nextafter(level, 0.f);
  for_each_above(e, n, thr, [&](int32_t i) { idx[c++] = i, m += e[i]; });
  mass = m;
  return c;
}

struct Truncation {
  bool top_p_on;
  double top_p;
  float min_p;  // 0 = off; else a probability relative to the top token, <= 1
};

// From candidates idx[0..n) that contain the whole kept set: applies top-p (relative to z_ref), then min-p,
// then draws with u over the rest renormalised.
int32_t draw_from(int32_t *idx, int32_t n, const float *x, const float *e, double z_ref, const Truncation &tr,
                  double u) {
  int32_t m = n;
  if (tr.top_p_on) {
    const int32_t r = cross_at(idx, n, x, e, tr.top_p * z_ref, false);
    m = r < n ? r + 1 : n;
  }
  double z = 0;
  if (tr.min_p > 0) {
    int32_t k = 0;
    for (int32_t i = 0; i < m; ++i)
      if (e[idx[i]] >= tr.min_p) idx[k++] = idx[i], z += e[idx[i]];
    m = k;  // never 0: the top token has e == 1 >= min_p
  } else {
    for (int32_t i = 0; i < m; ++i) z += e[idx[i]];
  }
  const int32_t r = cross_at(idx, m, x, e, u * z, true);
  if (r < m) return idx[r];
  return *std::max_element(idx, idx + m, Before{x});  // rounding left u*z beyond the sum: the last token
}

int32_t sample_token(const float *x, int32_t vocab, float mx, const SamplingParams &p, double u,
                     SamplerScratch &sc, double *log_z_raw) {
  const float inv_t = 1.f / p.temperature;
  const Truncation tr{p.top_p < 1.f, std::max(double(p.top_p), 0.0), p.min_p > 0.f ? std::min(p.min_p, 1.f) : 0.f};
  float *e = sc.probs.data();
  int32_t *idx = sc.idx.data();
  const bool top_k_on = p.top_k > 0 && p.top_k < vocab;

  if (top_k_on && p.top_k <= kHeapTopK) {
    // Only the top-k tokens (and any tied with the k-th: TopKLogitsWarper keeps scores >= the k-th) matter.
    const float kth = kth_largest(x, vocab, p.top_k, e);
    int32_t n = 0;
    for_each_above(x, vocab, std::nextafter(kth, -kInf), [&](int32_t i) { idx[n++] = i; });
    double z = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i += 4) {
      const int32_t c = std::min(4, n - i);
      f4 v = splat(-kInf);
      for (int32_t j = 0; j < c; ++j) v[j] = x[idx[i + j]];
      const f4 q = exp4((v - splat(mx)) * splat(inv_t));
      for (int32_t j = 0; j < c; ++j)
        if (q[j] > 0) e[idx[i + j]] = q[j], z += q[j], idx[k++] = idx[i + j];
    }
    return draw_from(idx, k, x, e, z, tr, u);
  }

  float floor = -kInf;  // a large top-k: its threshold by selection on a copy, then the full-vocabulary path
  if (top_k_on) {
    for (int32_t i = 0; i < vocab; ++i) e[i] = x[i] == x[i] ? x[i] : -kInf;
    std::nth_element(e, e + p.top_k - 1, e + vocab, std::greater<float>());
    floor = e[p.top_k - 1];
  }
  float level_mass[kLevels];
  const double z = unnormalised_probs(x, vocab, mx, inv_t, floor, e, level_mass);
  if (inv_t == 1.f && !top_k_on && log_z_raw) *log_z_raw = double(mx) + std::log(z);

  double mass = 0;
  if (!tr.top_p_on && tr.min_p > 0) {  // min-p alone: a plain threshold
    const int32_t n = collect(e, vocab, tr.min_p, idx, mass);
    return draw_from(idx, n, x, e, z, tr, u);
  }
  // Top-p needs the tokens down to where the mass reaches top_p * z; a plain draw those down to u * z.
  const double target = tr.top_p_on ? tr.top_p * z : u * z;
  int l = 0;
  while (l < kLevels && double(level_mass[l]) < target * (1 + 1e-4)) ++l;
  for (;; ++l) {
    const float level = l < kLevels ? kLevel[l] : std::numeric_limits<float>::denorm_min();
    const bool min_p_binds = tr.min_p >= level;  // nothing below min_p can be kept anyway
    const int32_t n = collect(e, vocab, std::max(level, tr.min_p), idx, mass);
    if (tr.top_p_on && (mass >= target || min_p_binds || l >= kLevels)) return draw_from(idx, n, x, e, z, tr, u);
    if (!tr.top_p_on && (mass > target || l >= kLevels)) {
      const int32_t r = cross_at(idx, n, x, e, target, true);
      return r < n ? idx[r] : *std::max_element(idx, idx + n, Before{x});
    }
  }
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
    if (sc.idx.size() < size_t(vocab)) sc.idx.resize(vocab);
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
