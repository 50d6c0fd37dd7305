// vt::sample and vt::Rng against references computed here in double: greedy and log_softmax exactly, the
// sampled distributions by chi-square goodness of fit, the truncations (top-k, top-p, min-p, as transformers'
// warpers define them) by a brute-force full sort on a 151936-token vocabulary, determinism per seed, and
// degenerate logits. `test_sampling --bench` also prints rough timings (no timed assertions).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sampling.h"

using vt::Rng;
using vt::SampleResult;
using vt::SamplerScratch;
using vt::SamplingParams;

static int g_pass = 0, g_fail = 0;
#define CHECK(cond, ...)                                             \
  do {                                                               \
    if (cond) {                                                      \
      ++g_pass;                                                      \
    } else {                                                         \
      ++g_fail;                                                      \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
      std::printf(__VA_ARGS__);                                      \
      std::printf("\n");                                             \
    }                                                                \
  } while (0)

constexpr float kInf = std::numeric_limits<float>::infinity();

static SamplingParams params(float t, int k = 0, float top_p = 1.f, float min_p = 0.f, int logprobs = 0) {
  SamplingParams p;
  p.temperature = t, p.top_k = k, p.top_p = top_p, p.min_p = min_p, p.logprobs = logprobs;
  return p;
}

static std::vector<float> normal_logits(int n, double sigma, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0, sigma);
  std::vector<float> x(n);
  for (auto &v : x) v = float(d(g));
  return x;
}

// ---- references, in double ----

static std::vector<double> log_softmax(const std::vector<float> &x) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, double(v));
  double z = 0;
  for (float v : x) z += std::exp(double(v) - m);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = double(x[i]) - m - std::log(z);
  return out;
}

// Ids by logit descending, ties to the lower id (a full sort).
static std::vector<int> descending(const std::vector<float> &x) {
  std::vector<int> o(x.size());
  std::iota(o.begin(), o.end(), 0);
  std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return x[a] > x[b]; });
  return o;
}

// The distribution transformers' warpers leave (temperature, top-k keeping ties with the k-th, top-p on the
// top-k distribution, min-p relative to the top probability), renormalised: probability per id (0 = dropped).
// slack moves top_p and min_p by a relative 1e-6 towards keeping more (+1) or fewer (-1) tokens; margin: the
// smallest relative distance of any keep/drop decision from its threshold.
constexpr double kSlack = 1e-6;
static std::vector<double> truncated(const std::vector<float> &x, const std::vector<int> &order,
                                     const SamplingParams &p, int slack = 0, double *margin = nullptr) {
  const int n = int(x.size());
  int kept = n;
  if (p.top_k > 0 && p.top_k < n) {
    const float kth = x[order[p.top_k - 1]];
    kept = p.top_k;
    while (kept < n && x[order[kept]] >= kth) ++kept;
  }
  const double m = x[order[0]];
  std::vector<double> w(kept);
  double z = 0;
  for (int j = 0; j < kept; ++j) z += w[j] = std::exp((double(x[order[j]]) - m) / p.temperature);
  double mg = INFINITY;
  if (p.top_p < 1.f) {
    const double target = (std::max(double(p.top_p), 0.0) + slack * kSlack) * z;
    double cum = 0;
    int j = 0;
    for (; j < kept && (j == 0 || cum < target); ++j) cum += w[j];  // keep while the mass before is < top_p
    if (j > 1) mg = std::min(mg, std::abs(cum - w[j - 1] - target) / z);
    if (j < kept) mg = std::min(mg, std::abs(cum - target) / z);
    kept = j;
  }
  if (p.min_p > 0) {
    const double min_p = std::min(double(p.min_p), 1.0) * (1 - slack * kSlack);
    int j = 1;
    for (int i = 1; i < kept; ++i) {
      mg = std::min(mg, std::abs(w[i] - min_p) / min_p);
      if (w[i] >= min_p) w[j++] = w[i];
    }
    kept = j;  // w is descending, so the kept ones are a prefix
  }
  double zk = 0;
  for (int j = 0; j < kept; ++j) zk += w[j];
  std::vector<double> prob(n, 0.0);
  for (int j = 0; j < kept; ++j) prob[order[j]] = w[j] / zk;
  if (margin) *margin = mg;
  return prob;
}

// The inverse-CDF draw over `prob` in descending order for a given u.
static int draw(const std::vector<double> &prob, const std::vector<int> &order, double u) {
  double cum = 0;
  int last = -1;
  for (int id : order) {
    if (prob[id] == 0) continue;
    if ((cum += prob[id]) > u) return id;
    last = id;
  }
  return last;
}

// ---- chi-square ----

static double gamma_p(double a, double x) {  // regularised lower incomplete gamma, series (fine for x < ~100)
  if (x <= 0) return 0;
  double term = 1 / a, sum = term;
  for (int n = 1; n < 1000 && term > sum * 1e-17; ++n) sum += term *= x / (a + n);
  return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

static double chi2_quantile(int df, double q) {  // by bisection on the CDF
  double lo = 0, hi = 10 + 10.0 * df;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (gamma_p(df / 2.0, mid / 2) < q ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Draws n samples (spread over 4 seeds) and tests the frequencies against `prob` (0 = must never appear).
static void check_distribution(const char *name, const std::vector<float> &x, const SamplingParams &p,
                               const std::vector<double> &prob, int n = 200000) {
  std::vector<long> count(x.size(), 0);
  SamplerScratch sc;
  bool in_range = true;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Rng rng(seed * 7919);
    for (int i = 0; i < n / 4; ++i) {
      const int t = vt::sample(x.data(), int(x.size()), p, rng, sc).token;
      if (t < 0 || t >= int(x.size())) in_range = false;
      else ++count[t];
    }
  }
  CHECK(in_range, "%s: token out of range", name);
  long excluded = 0;
  double chi2 = 0;
  int cats = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (prob[i] == 0) {
      excluded += count[i];
      continue;
    }
    const double e = prob[i] * n;
    chi2 += (count[i] - e) * (count[i] - e) / e;
    ++cats;
  }
  CHECK(excluded == 0, "%s: %ld draws of excluded tokens", name, excluded);
  if (cats > 1) {
    const double limit = chi2_quantile(cats - 1, 0.999);
    CHECK(chi2 < limit, "%s: chi2 %.2f >= %.2f (df %d)", name, chi2, limit, cats - 1);
    std::printf("  %-34s kept %2d  chi2 %6.2f  (0.999 quantile %.2f)\n", name, cats, chi2, limit);
  }
}

// ---- tests ----

static void test_rng() {
  CHECK(std::abs(chi2_quantile(1, 0.999) - 10.828) < 1e-3 && std::abs(chi2_quantile(11, 0.999) - 31.264) < 1e-3 &&
            std::abs(chi2_quantile(20, 0.999) - 45.315) < 1e-3,
        "chi-square quantiles disagree with the table (10.828, 31.264, 45.315)");
  Rng a(42), b(42), c(43), zero(0);
  bool same = true, differ = false, range = true, grid = true, zero_ok = false;
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t va = a.next(), vb = b.next(), vc = c.next();
    same &= va == vb;
    differ |= va != vc;
    zero_ok |= zero.next() != 0;
    const double u = a.uniform();
    b.uniform();
    range &= u >= 0 && u < 1;
    grid &= std::ldexp(u, 53) == std::floor(std::ldexp(u, 53));
    sum += u;
  }
  CHECK(same && differ, "seeded streams: same seed must repeat, another must differ");
  CHECK(zero_ok, "seed 0 gives a stuck generator");
  CHECK(range && grid, "uniform() must be in [0,1) on the 2^-53 grid");
  CHECK(std::abs(sum / 100000 - 0.5) < 0.005, "uniform() mean %.4f", sum / 100000);
}

static void test_greedy_and_logprobs() {
  SamplerScratch sc;
  for (int vocab : {1, 7, 1000, 151936}) {
    auto x = normal_logits(vocab, 3.0, vocab);
    const auto copy = x;
    const auto ref = log_softmax(x);
    const auto order = descending(x);
    Rng rng(5), untouched(5);
    const SampleResult r = vt::sample(x.data(), vocab, params(0.f), rng, sc);
    CHECK(r.token == order[0] && r.n_top == 0, "vocab %d: greedy %d, argmax %d", vocab, r.token, order[0]);
    for (int lp : {1, 5, 20, 50}) {
      const SampleResult q = vt::sample(x.data(), vocab, params(0.f, 0, 1.f, 0.f, lp), rng, sc);
      const int n = std::min({lp, 20, vocab});
      bool ok = q.token == order[0] && q.n_top == n && std::abs(q.logprob - ref[order[0]]) < 1e-5;
      for (int j = 0; j < n && ok; ++j) ok = q.top_ids[j] == order[j] && std::abs(q.top_logprobs[j] - ref[order[j]]) < 1e-5;
      CHECK(ok, "vocab %d logprobs %d: greedy with logprobs differs from the double log_softmax", vocab, lp);
    }
    CHECK(rng.next() == untouched.next(), "vocab %d: greedy advanced the rng", vocab);
    CHECK(std::memcmp(x.data(), copy.data(), vocab * sizeof(float)) == 0, "vocab %d: logits modified", vocab);
  }
  // Ties: the lowest id wins, in the argmax and in the top list.
  std::vector<float> t = {1, 3, 0, 3, 2, 3, 2, -1, 3, 0, 1, 2, 3, 2, 1, 0, 3};
  Rng rng(1);
  CHECK(vt::sample(t.data(), int(t.size()), params(0.f), rng, sc).token == 1, "greedy tie must go to id 1");
  const SampleResult q = vt::sample(t.data(), int(t.size()), params(0.f, 0, 1.f, 0.f, 9), rng, sc);
  const int want[9] = {1, 3, 5, 8, 12, 16, 4, 6, 11};
  bool ok = q.token == 1 && q.n_top == 9;
  for (int j = 0; j < 9 && ok; ++j) ok = q.top_ids[j] == want[j];
  CHECK(ok, "top list with ties must be ordered by logit then id");
  const auto ref = log_softmax(t);
  CHECK(std::abs(q.top_logprobs[0] - ref[1]) < 1e-6 && std::abs(q.top_logprobs[8] - ref[11]) < 1e-6, "tied logprobs");

  // Sampled tokens report the raw log_softmax (before temperature and truncation), whatever path picked them.
  auto x = normal_logits(151936, 2.0, 77);
  const auto ls = log_softmax(x);
  const auto order = descending(x);
  for (const SamplingParams &p : {params(0.7f, 40, 1.f, 0.f, 5), params(1.f, 0, 0.9f, 0.f, 5),
                                  params(1.f, 0, 1.f, 0.f, 3), params(1.3f, 0, 0.95f, 0.02f, 20),
                                  params(0.8f, 10000, 1.f, 0.f, 1)}) {
    bool good = true;
    for (int i = 0; i < 20 && good; ++i) {
      const SampleResult s = vt::sample(x.data(), int(x.size()), p, rng, sc);
      good = s.token >= 0 && std::abs(s.logprob - ls[s.token]) < 1e-5 && s.top_ids[0] == order[0] &&
             std::abs(s.top_logprobs[s.n_top - 1] - ls[order[s.n_top - 1]]) < 1e-5;
    }
    CHECK(good, "T %.1f k %d p %.2f: sampled logprob must be the raw log_softmax", p.temperature, p.top_k, p.top_p);
  }
}

static void test_distributions() {
  // 12 tokens, ids not in logit order.
  const std::vector<float> x = {0.3f, -1.5f, 2.0f, -0.4f, 1.0f, -3.0f, 1.5f, 0.0f, -2.2f, 0.7f, 1.2f, -0.9f};
  const auto order = descending(x);
  struct Case {
    const char *name;
    SamplingParams p;
  } cases[] = {
      {"T=1", params(1.f)},
      {"T=0.7", params(0.7f)},
      {"T=1.6", params(1.6f)},
      {"top_k=4", params(1.f, 4)},
      {"top_k=1", params(0.9f, 1)},
      {"top_p=0.8", params(1.f, 0, 0.8f)},
      {"T=0.7 top_p=0.9", params(0.7f, 0, 0.9f)},
      {"min_p=0.1", params(1.f, 0, 1.f, 0.1f)},
      {"T=1.5 min_p=0.2", params(1.5f, 0, 1.f, 0.2f)},
      {"T=0.8 top_k=8 top_p=0.93 min_p=0.15", params(0.8f, 8, 0.93f, 0.15f)},  // each drops some
      {"T=1.2 top_k=6 top_p=0.7", params(1.2f, 6, 0.7f)},
      {"top_p=0.9 min_p=0.3 (min-p binds)", params(1.f, 0, 0.9f, 0.3f)},
  };
  for (const Case &c : cases) {
    double margin;
    const auto prob = truncated(x, order, c.p, 0, &margin);
    CHECK(margin > 1e-3, "%s: the test's thresholds sit too close to a boundary (%.2g)", c.name, margin);
    check_distribution(c.name, x, c.p, prob);
  }
  // Ties at the top-k boundary are kept (scores >= the k-th, as TopKLogitsWarper), ties drawn evenly.
  const std::vector<float> tied = {1.f, 2.f, 2.f, 0.5f, 2.f, 1.f, 1.f, -1.f};
  const auto tied_order = descending(tied);
  check_distribution("ties, top_k=2 keeps all three 2s", tied, params(1.f, 2), truncated(tied, tied_order, params(1.f, 2)));
  check_distribution("ties, top_k=4", tied, params(0.5f, 4), truncated(tied, tied_order, params(0.5f, 4)));
}

// Every combination against the brute-force reference with the same u. Float rounding may legitimately decide
// a draw that sits within ~1e-6 of a boundary, so a draw counts only when the reference gives the same token
// with top_p, min_p and u all moved by 1e-6 either way.
static void test_large_vocab() {
  const int vocab = 151936;
  struct Logits {
    const char *name;
    std::vector<float> x;
  };
  std::vector<Logits> sets;
  sets.push_back({"normal sigma 3", normal_logits(vocab, 3.0, 11)});
  sets.push_back({"flat sigma 0.3", normal_logits(vocab, 0.3, 12)});
  auto peaked = normal_logits(vocab, 1.5, 13);
  for (int i = 0; i < 30; ++i) peaked[(i * 7919 + 17) % vocab] += 12.f - 0.3f * i;  // an LLM-like head
  sets.push_back({"peaked", peaked});
  auto ties = normal_logits(vocab, 2.0, 14);
  for (auto &v : ties) v = std::round(v * 2) / 2;  // heavy ties
  sets.push_back({"quantised (ties)", ties});

  const SamplingParams combos[] = {
      params(1.f), params(0.7f), params(1.5f), params(1.f, 1), params(1.f, 40), params(0.7f, 50),
      params(1.f, 3000, 0.9f), params(1.f, 5000), params(1.f, 100000), params(1.f, 0, 0.9f), params(0.7f, 0, 0.5f),
      params(1.3f, 0, 0.95f), params(1.f, 0, 0.999f), params(1.f, 0, 1e-6f), params(1.f, 0, 1.f, 0.05f),
      params(2.f, 0, 1.f, 0.5f), params(1.f, 40, 0.9f), params(0.8f, 5000, 0.9f, 0.02f), params(1.f, 0, 0.9f, 0.01f),
      params(1.f, 0, 0.95f, 0.2f), params(1.f, 100000, 0.8f), params(1.f, 0, 0.9f, 1.f), params(1.f, 0, 1.f, 1e-4f),
      params(1.2f, 0, 0.99f, 1e-5f), params(0.9f, 2000, 1.f, 1e-3f)};
  SamplerScratch sc;
  for (const Logits &s : sets) {
    const auto order = descending(s.x);
    int checked = 0, mismatched = 0, near = 0, excluded = 0;
    std::string first;
    for (const SamplingParams &p : combos) {
      const auto prob = truncated(s.x, order, p), more = truncated(s.x, order, p, +1), fewer = truncated(s.x, order, p, -1);
      for (uint64_t seed = 1; seed <= 12; ++seed) {
        Rng rng(seed * 1000003), mirror = rng;
        const int t = vt::sample(s.x.data(), vocab, p, rng, sc).token;
        const double u = mirror.uniform();
        const int want = draw(prob, order, u);
        if (t < 0 || t >= vocab || prob[t] == 0) ++excluded;
        bool stable = true;
        for (const auto *q : {&more, &fewer})
          for (double du : {-kSlack, kSlack}) stable &= draw(*q, order, u + du) == want;
        if (!stable) {
          ++near;
          continue;
        }
        ++checked;
        if (t != want && mismatched++ == 0)
          first = "T " + std::to_string(p.temperature) + " k " + std::to_string(p.top_k) + " p " +
                  std::to_string(p.top_p) + " min_p " + std::to_string(p.min_p) + " seed " + std::to_string(seed) +
                  ": got " + std::to_string(t) + ", want " + std::to_string(want);
      }
    }
    CHECK(excluded == 0, "%s: %d draws outside the kept set (or out of range)", s.name, excluded);
    CHECK(mismatched == 0, "%s: %d of %d draws differ from the brute-force reference; first: %s", s.name, mismatched,
          checked, first.c_str());
    CHECK(checked >= (checked + near) / 4, "%s: %d of %d draws too near a boundary to compare", s.name, near,
          checked + near);
    std::printf("  large vocab, %-17s %3d draws match the full-sort reference (%d too near a boundary)\n", s.name,
                checked, near);
  }
}

static void test_determinism() {
  const auto x = normal_logits(5000, 2.0, 3);
  SamplerScratch sc;
  auto run = [&](uint64_t seed, const SamplingParams &p, int steps, Rng *out = nullptr) {
    Rng rng(seed);
    std::vector<int> seq;
    for (int i = 0; i < steps; ++i) seq.push_back(vt::sample(x.data(), int(x.size()), p, rng, sc).token);
    if (out) *out = rng;
    return seq;
  };
  for (const SamplingParams &p : {params(1.f), params(0.8f, 40, 0.9f), params(1.f, 0, 0.95f, 0.05f)}) {
    const auto a = run(123, p, 500), b = run(123, p, 500), c = run(124, p, 500);
    SamplingParams with_lp = p;
    with_lp.logprobs = 7;
    CHECK(a == b, "same seed must give the same tokens (T %.1f k %d)", p.temperature, p.top_k);
    CHECK(a != c, "different seeds gave the same 500 tokens (T %.1f k %d)", p.temperature, p.top_k);
    CHECK(run(123, with_lp, 500) == a, "asking for logprobs must not change the tokens");
    Rng after(0), fresh(123);
    run(123, p, 500, &after);
    for (int i = 0; i < 500; ++i) fresh.uniform();
    CHECK(after.next() == fresh.next(), "a sampled step must use exactly one uniform (T %.1f)", p.temperature);
  }
  // A request's draws do not depend on what else was sampled in between (its own Rng, shared scratch).
  Rng r1(9), r2(9), other(10);
  const auto y = normal_logits(151936, 2.0, 4);
  bool same = true;
  for (int i = 0; i < 50; ++i) {
    const int a = vt::sample(x.data(), int(x.size()), params(1.f, 0, 0.9f), r1, sc).token;
    vt::sample(y.data(), int(y.size()), params(1.2f, 0, 0.99f), other, sc);
    SamplerScratch fresh;
    same &= a == vt::sample(x.data(), int(x.size()), params(1.f, 0, 0.9f), r2, fresh).token;
  }
  CHECK(same, "interleaved requests changed a seeded sequence");
}

static void test_robustness() {
  SamplerScratch sc;
  Rng rng(7);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const SamplingParams modes[] = {params(0.f), params(0.f, 0, 1.f, 0.f, 3), params(1.f), params(1.f, 2),
                                  params(0.7f, 0, 0.9f), params(1.f, 0, 1.f, 0.1f), params(1.f, 3, 0.5f, 0.2f, 20)};
  auto for_all = [&](const char *name, std::vector<float> x, auto &&ok) {
    const auto copy = x;
    for (const SamplingParams &p : modes)
      for (int i = 0; i < 200; ++i) {
        const SampleResult r = vt::sample(x.data(), int(x.size()), p, rng, sc);
        if (!(r.token >= 0 && r.token < int(x.size()) && ok(r, p))) {
          CHECK(false, "%s: T %.1f k %d p %.2f min_p %.2f lp %d gave %d", name, p.temperature, p.top_k, p.top_p,
                p.min_p, p.logprobs, r.token);
          return;
        }
      }
    CHECK(std::memcmp(x.data(), copy.data(), x.size() * sizeof(float)) == 0, "%s: logits modified", name);
  };
  for_all("NaN and -inf never drawn", {nan, 1.f, -kInf, 0.5f, nan, 0.f, -kInf, 0.2f, nan},
          [](const SampleResult &r, const SamplingParams &) { return r.token == 1 || r.token == 3 || r.token == 5 || r.token == 7; });
  for_all("all -inf gives id 0", std::vector<float>(100, -kInf), [](const SampleResult &r, const SamplingParams &) {
    return r.token == 0 && std::isfinite(r.logprob);
  });
  for_all("all NaN gives id 0", std::vector<float>(100, nan), [](const SampleResult &r, const SamplingParams &) { return r.token == 0; });
  for_all("NaN then -inf gives id 0", {nan, -kInf, -kInf}, [](const SampleResult &r, const SamplingParams &) { return r.token == 0; });
  for_all("vocab 1", {3.f}, [](const SampleResult &r, const SamplingParams &p) {
    return r.token == 0 && (p.logprobs == 0 || (r.logprob == 0.f && r.n_top == 1 && r.top_logprobs[0] == 0.f));
  });
  for_all("+inf logits share the draw", {1.f, kInf, 5.f, nan, kInf, 2.f}, [](const SampleResult &r, const SamplingParams &p) {
    return (r.token == 1 || r.token == 4) && (p.logprobs == 0 || std::abs(r.logprob - std::log(0.5f)) < 1e-6);
  });
  auto x = normal_logits(151936, 2.5, 21);
  const int top = int(std::max_element(x.begin(), x.end()) - x.begin());
  bool greedy_like = true;
  for (const SamplingParams &p : {params(1.f, 0, 1e-7f), params(1.f, 0, 0.f), params(2.f, 1), params(1.f, 0, 1.f, 1.f)})
    for (int i = 0; i < 100; ++i) greedy_like &= vt::sample(x.data(), int(x.size()), p, rng, sc).token == top;
  CHECK(greedy_like, "top_p ~0, top_k 1 and min_p 1 must always give the argmax");
  // A row of zeros whose largest value is read as -0 (the first of the row): top_p 0 still keeps the first token
  // alone (the bucketing of its walk once saw hi - lo = -0, a scale of -inf, and dropped the nucleus).
  std::vector<float> zeros(20000, 0.f);
  for (size_t i = 0; i < zeros.size(); i += 5) zeros[i] = -0.f;
  bool first_only = true;
  for (int lp : {0, 1})
    for (int i = 0; i < 50; ++i) first_only &= vt::sample(zeros.data(), int(zeros.size()), params(1.f, 0, 0.f, 0.f, lp), rng, sc).token == 0;
  CHECK(first_only, "top_p 0 over equal logits (-0 and +0) must give the first token");
  // Out-of-range parameters degrade to a defined behaviour, never to a bad id.
  bool sane = true;
  const float odd_t[] = {1e-45f, 1e-30f, 1e30f, kInf, nan, -1.f};
  for (float t : odd_t)
    for (int i = 0; i < 5; ++i) {
      const int id = vt::sample(x.data(), int(x.size()), params(t, 0, 0.9f), rng, sc).token;
      sane &= id >= 0 && id < int(x.size()) && (t > 1e-20f || id == top);  // tiny, NaN and negative T: greedy
    }
  for (const SamplingParams &p : {params(1.f, -5), params(1.f, 0, nan), params(1.f, 0, -0.5f), params(1.f, 0, 1.f, 2.f),
                                  params(1.f, 0, 1.f, nan), params(1.f, 1 << 30)}) {
    const int id = vt::sample(x.data(), int(x.size()), p, rng, sc).token;
    sane &= id >= 0 && id < int(x.size()) && (!(p.top_p < 0 || p.min_p > 1) || id == top);
  }
  CHECK(sane, "odd parameters (tiny/huge/NaN temperature, negative top_k, NaN top_p, min_p > 1) misbehaved");
  auto holes = normal_logits(151936, 1.0, 22);  // NaN and -inf sprinkled over a wide, flat distribution
  for (size_t i = 0; i < holes.size(); i += 3) holes[i] = i % 2 ? nan : -kInf;
  bool clean = true;
  for (const SamplingParams &p : {params(1.f), params(1.f, 0, 0.99f), params(2.f, 0, 1.f, 0.01f), params(1.f, 50000)})
    for (int i = 0; i < 50; ++i) clean &= vt::sample(holes.data(), int(holes.size()), p, rng, sc).token % 3 != 0;
  CHECK(clean, "a NaN or -inf logit was drawn from a large vocabulary");
  // NaN anywhere must not hide a larger logit from the vectorised scans (greedy, top list, top-k).
  auto nans = normal_logits(151936, 2.0, 23);
  for (size_t i = 0; i < nans.size(); i += 61) nans[i] = nan;
  nans[4097] = 30.f, nans[70001] = 29.f, nans[150000] = 28.f;
  const SampleResult g = vt::sample(nans.data(), int(nans.size()), params(0.f, 0, 1.f, 0.f, 3), rng, sc);
  CHECK(vt::sample(nans.data(), int(nans.size()), params(0.f), rng, sc).token == 4097 && g.token == 4097 &&
            g.top_ids[1] == 70001 && g.top_ids[2] == 150000,
        "NaN logits hid the largest ones (greedy %d, top %d %d %d)", g.token, g.top_ids[0], g.top_ids[1], g.top_ids[2]);
  bool top3 = true;
  for (int i = 0; i < 100; ++i) {
    const int t = vt::sample(nans.data(), int(nans.size()), params(3.f, 3), rng, sc).token;
    top3 &= t == 4097 || t == 70001 || t == 150000;
  }
  CHECK(top3, "top_k=3 with NaN logits must draw from the three largest");
  // Counts clamp: logprobs > vocab gives vocab entries; logprobs > 20 gives 20.
  std::vector<float> five = {0.f, 1.f, 2.f, 3.f, 4.f};
  CHECK(vt::sample(five.data(), 5, params(1.f, 0, 1.f, 0.f, 10), rng, sc).n_top == 5, "n_top must clamp to vocab");
  CHECK(vt::sample(x.data(), int(x.size()), params(0.f, 0, 1.f, 0.f, 100), rng, sc).n_top == 20, "n_top must clamp to 20");
  CHECK(vt::sample(nullptr, 0, params(1.f), rng, sc).token == -1, "empty input has no token");
}

static void bench() {
  // head: 20 tokens far above the bulk hold nearly all the mass (the usual shape of an LLM's next token);
  // tail: the same bulk but a lower head, so ~30% of the mass is spread over the whole vocabulary; flat.
  auto head = normal_logits(151936, 2.0, 99), tail = head;
  for (int i = 0; i < 20; ++i) head[(i * 104729) % head.size()] += 24.f - 0.5f * i;
  for (int i = 0; i < 20; ++i) tail[(i * 104729) % tail.size()] += 14.f - 0.5f * i;
  const auto flat = normal_logits(151936, 0.5, 98);
  SamplerScratch sc;
  Rng rng(1);
  struct B {
    const char *name;
    const std::vector<float> *x;
    SamplingParams p;
  } cases[] = {{"greedy", &head, params(0.f)},
               {"greedy + logprobs=5", &head, params(0.f, 0, 1.f, 0.f, 5)},
               {"head: T=1 top_p=0.9", &head, params(1.f, 0, 0.9f)},
               {"head: T=0.7 top_p=0.9 logprobs=5", &head, params(0.7f, 0, 0.9f, 0.f, 5)},
               {"head: T=1", &head, params(1.f)},
               {"head: T=0.8 top_k=40", &head, params(0.8f, 40)},
               {"head: T=1 min_p=0.05", &head, params(1.f, 0, 1.f, 0.05f)},
               {"tail: T=1 top_p=0.9", &tail, params(1.f, 0, 0.9f)},
               {"tail: T=1", &tail, params(1.f)},
               {"flat: T=1 top_p=0.9", &flat, params(1.f, 0, 0.9f)},
               {"flat: T=1", &flat, params(1.f)}};
  std::printf("timing, vocab 151936, median of 300 calls:\n");
  for (const B &b : cases) {
    std::vector<double> us;
    int sink = 0;
    for (int i = 0; i < 310; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      sink += vt::sample(b.x->data(), int(b.x->size()), b.p, rng, sc).token;
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= 10) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    std::printf("  %-34s %8.1f us   (%d)\n", b.name, us[us.size() / 2], sink & 1);
  }
}

int main(int argc, char **argv) {
  test_rng();
  test_greedy_and_logprobs();
  test_distributions();
  test_large_vocab();
  test_determinism();
  test_robustness();
  if (argc > 1 && std::string(argv[1]) == "--bench") bench();
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
