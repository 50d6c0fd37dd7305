// CUDA op checks: sampling, penalties and top-N logprobs on the GPU against the host sampler (argmax: argmax.cpp).
#include "../cuda_check.h"

namespace cuda_tests {

// ---------------------------------------------------------------------------------------------------------------
// Sampling on the GPU (Ops::sample) against the CPU sampler (vt::sample, the same u from the same Rng) and
// against an exact reference of the rules in double (sample_ref). The GPU and the CPU each compute every e
// with a relative error below kSampleEps (the CPU's exp4: measured 1.9e-7 over all of [-87, 0]; CUDA's expf:
// 2 ulp), the CPU adds pairs of them in float for z, and the GPU rounds masses to 2^-44 of the top token's,
// so each lands on the reference's token unless a threshold falls within that error of a cumulative sum.
// sample_ref says when: such rows are "ambiguous", where the GPU's token must only be a plausible one (in S,
// passing min-p and the nucleus with slack); every other row must give the reference's token on both sides.
// Each check prints how many rows were ambiguous; more than a quarter fails it (a bound gone loose).

constexpr double kSampleEps = 5e-7;  // per-term relative error bound, each side (measured max 1.9e-7 and 2.4e-7)

// Rows the GPU sampler must get right beyond fill_logits_row's kinds 0-7 (which cover flat and wide values,
// planted ties, -inf, NaN, rows of only -inf/NaN, +inf entries, one dominant value):
//   8: an LLM-like row, normal(0, 2) with a few spikes up to +12 (peaked: small nuclei);
//   9: every value equal (0, with some -0): one run of equal values, vocab long;
//   10: four values only (runs of ~vocab/4 equal values, at and below the max);
//   11: uniform in [-0.5, 0.5] (a few thousand tokens per histogram bin);
//   12: +inf at every 8th id (more +inf entries than the GPU gathers at once) and random values elsewhere;
//   13: the max repeated at ~2% of the ids (a long run at the top) over normal(0, 1);
//   14: distinct values packed into [0, 0.02) (one or two histogram bins: the GPU narrows them by key digits)
//       with 2500 ids at 0.01 (a run inside them).
constexpr int kSampleKinds = 15;
void fill_sample_row(float *x, int32_t vocab, int kind) {
  if (kind < 8) return fill_logits_row(x, vocab, kind);
  std::normal_distribution<double> normal(0, kind == 8 ? 2 : 1);
  for (int32_t i = 0; i < vocab; ++i) {
    switch (kind) {
      case 8: x[i] = float(normal(g_rng)); break;
      case 9: x[i] = below(5) == 0 ? -0.f : 0.f; break;
      case 10: x[i] = float(below(4)) * 0.75f; break;
      case 11: x[i] = float(uni(-0.5, 0.5)); break;
      case 12: x[i] = i % 8 == 3 ? INFINITY : float(uni(-3, 3)); break;
      case 14: x[i] = float(uni(0, 0.02)); break;
      default: x[i] = below(50) == 0 ? 4.5f : float(normal(g_rng)); break;
    }
  }
  if (kind == 8)
    for (int j = 0; j < 6; ++j) x[below(vocab)] = float(uni(6, 12));
  if (kind == 14)
    for (int j = 0; j < 2500; ++j) x[below(vocab)] = 0.01f;
}

// What sample_ref needs of a row whatever the parameters: its max and first argmax, and its finite values
// (+inf read as 0 and the rest as -inf in a row with +inf) by value descending, ties to the lower id; log_z:
// the raw log-normaliser (NaN carries no probability; a +inf row shares it among its +inf entries).
struct RowOrder {
  float mx = -INFINITY;
  int32_t arg = 0;
  bool inf_mode = false;
  std::vector<std::pair<float, int32_t>> ord;
  double log_z = 0;
};
RowOrder row_order(const float *x, int32_t vocab) {
  RowOrder o;
  for (int32_t i = 0; i < vocab; ++i)
    if (x[i] > o.mx) o.mx = x[i], o.arg = i;
  o.inf_mode = o.mx == INFINITY;
  if (o.mx == -INFINITY) return o.log_z = std::log(double(vocab)), o;
  double s = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    if (o.inf_mode) s += x[i] == INFINITY ? 1 : 0;
    else if (!std::isnan(x[i])) s += std::exp(double(x[i]) - double(o.mx));
    const float v = o.inf_mode ? (x[i] == INFINITY ? 0.f : -INFINITY) : x[i];
    if (std::isfinite(v)) o.ord.push_back({v, i});
  }
  o.log_z = (o.inf_mode ? 0.0 : double(o.mx)) + std::log(s);
  std::sort(o.ord.begin(), o.ord.end(), [](const auto &a, const auto &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  return o;
}
// log_softmax of the raw logits at id, the sampler's rules (a +inf row: its +inf entries share all of it).
double ref_logprob(const RowOrder &o, const float *x, int32_t id) {
  if (o.mx == -INFINITY) return -o.log_z;
  return (o.inf_mode ? 0.0 : double(x[id])) - o.log_z;
}

struct SampleRef {
  int32_t token = -1;
  bool ambiguous = false;
  std::string why;                 // for an ambiguous row: which decision
  std::vector<int32_t> plausible;  // for an ambiguous row: the tokens either side could pick (sorted)
};

// The sampler's rules (sampling.h), exactly, in double: e = exp of the same float argument, sums in double.
// Marks the row ambiguous where a decision lies within either side's error of its threshold. Each side's e is
// within kSampleEps (relative) of this one, except at d = 0 where all three are exactly 1; so a cumulative
// fraction f = cum / den (cum a prefix of den's terms) is off by at most (E_cum (den - cum) + cum E_rest) / den^2,
// E being the summed error bounds of the terms; plus, in absolute terms, the GPU's weight rounding (2^-45 per
// inexact term, one unit in its rounded thresholds) and the CPU's float pair sums in z (2^-24 of each sum that
// is not exact: every inexact term, and an exact partner per inexact term at most). A token's e against min_p:
// within kSampleEps unless exact.
SampleRef sample_ref(const RowOrder &o, int32_t vocab, const SamplingParams &p, double u) {
  SampleRef ref;
  if (o.mx == -INFINITY) return ref.token = 0, ref;
  const float inv_t = 1.f / p.temperature;
  if (!(p.temperature > 0.f) || !(inv_t < INFINITY)) return ref.token = o.arg, ref;
  const float m = o.inf_mode ? 0.f : o.mx;
  const auto &ord = o.ord;
  size_t ns = ord.size();  // S: a prefix of ord
  if (p.top_k > 0 && p.top_k < vocab && size_t(p.top_k) <= ord.size()) {
    const float kth = ord[size_t(p.top_k) - 1].first;
    ns = size_t(p.top_k);
    while (ns < ord.size() && ord[ns].first >= kth) ++ns;
  }
  std::vector<double> e(ns), err(ns);
  double z = 0, z_err = 0, inexact_mass = 0;
  size_t n_exact = 0;
  for (size_t j = 0; j < ns; ++j) {
    const float d = (m - ord[j].first) * inv_t;  // the kernels' and the host's float argument
    z += e[j] = std::exp(-double(d));
    err[j] = d == 0.f ? 0.0 : kSampleEps * e[j];
    z_err += err[j];
    if (d == 0.f) ++n_exact;
    else inexact_mass += e[j];
  }
  const size_t n_inexact = ns - n_exact;
  const double slack = (double(n_inexact) + 2) * 0x1p-44 + 0x1p-24 * (inexact_mass + double(std::min(n_exact, n_inexact)));
  const double min_p = p.min_p > 0.f ? double(std::min(p.min_p, 1.f)) : 0.0;
  std::vector<size_t> c;  // candidates: positions in ord
  for (size_t j = 0; j < ns; ++j) {
    if (min_p > 0 && err[j] > 0 && std::fabs(e[j] - min_p) <= kSampleEps * min_p) ref.ambiguous = true, ref.why = "min_p";
    if (e[j] > 0 && e[j] >= min_p) c.push_back(j);
  }
  std::vector<double> cum(c.size()), cum_err(c.size());
  double acc = 0, acc_err = 0;
  for (size_t j = 0; j < c.size(); ++j) cum[j] = acc += e[c[j]], cum_err[j] = acc_err += err[c[j]];
  auto near = [&](double cm, double cm_err, double den, double den_err, double target) {
    const double bound = (cm_err * (den - cm) + cm * (den_err - cm_err)) / (den * den) + slack / den;
    return std::fabs(cm / den - target) <= bound;
  };
  double mass = acc, mass_err = acc_err;
  size_t kept = c.size();
  const bool top_p_on = p.top_p < 1.f;
  const double top_p = top_p_on ? std::max(double(p.top_p), 0.0) : 1.0;
  if (top_p_on) {
    size_t j = 0;
    while (j < c.size() && cum[j] < top_p * z) ++j;
    if (j < c.size()) {
      if (near(cum[j], cum_err[j], z, z_err, top_p) || (j > 0 && near(cum[j - 1], cum_err[j - 1], z, z_err, top_p)))
        ref.ambiguous = true, ref.why = "top_p";
      mass = cum[j], mass_err = cum_err[j], kept = j + 1;
    } else if (near(acc, acc_err, z, z_err, top_p)) {
      ref.ambiguous = true, ref.why = "top_p (no cut)";
    }
  }
  size_t r = 0;
  while (r + 1 < kept && !(cum[r] > u * mass)) ++r;
  if ((r + 1 < kept && near(cum[r], cum_err[r], mass, mass_err, u)) ||
      (r > 0 && near(cum[r - 1], cum_err[r - 1], mass, mass_err, u)))
    ref.ambiguous = true, ref.why = "draw";
  if (e[c[r]] < 1e-10) ref.ambiguous = true, ref.why = "draw among tokens of no mass";
  ref.token = ord[c[r]].second;
  if (ref.ambiguous) {  // plausible: in S, e >= min_p with slack, within the nucleus with slack
    const double loose = 1e-5;
    double run = 0;
    for (size_t j = 0; j < ns; ++j) {
      if (e[j] < min_p * (1 - loose)) continue;
      ref.plausible.push_back(ord[j].second);
      run += e[j];
      if (top_p_on && run >= (top_p + loose) * z) break;
    }
    std::sort(ref.plausible.begin(), ref.plausible.end());
  }
  return ref;
}

// Seeds whose first Rng::uniform() is below 2^-20 (lo) or above 1 - 2^-20 (hi): the draws at the ends of the
// distribution, reachable through vt::sample.
struct EdgeSeeds {
  uint64_t lo = 0, hi = 0;
};
EdgeSeeds find_edge_seeds() {
  EdgeSeeds s;
  bool have_lo = false, have_hi = false;
  for (uint64_t seed = g_rng(); !(have_lo && have_hi); ++seed) {
    const double u = Rng(seed).uniform();
    if (!have_lo && u < 0x1p-20) s.lo = seed, have_lo = true;
    if (!have_hi && u > 1 - 0x1p-20) s.hi = seed, have_hi = true;
  }
  return s;
}

// One row's parameters and where its u comes from: a seed (vt::sample draws the same u) or an exact u that no
// seed is known to give (then the CPU side is left out).
struct SampleCase {
  SamplingParams p;
  uint64_t seed = 0;
  bool exact_u = false;
  double u = 0;
};

// The parameter grid each group of rows cycles through: temperature 0.3 / 1 / 2, top_k 1 / 40 / off, top_p
// 0.9 / off, min_p off / 0.05 (36), then the edges: greedy, a huge top_k, top_p 0, min_p 1, a temperature whose
// inverse overflows, a tiny one that does not, NaN top_p and min_p, a negative top_k, top_k = vocab - 1, and
// exact draws u = 0 and u = 1 - 2^-53 and seeds drawing u near 0 and near 1.
std::vector<SampleCase> sample_cases(int32_t vocab, const EdgeSeeds &edge) {
  std::vector<SampleCase> cases;
  auto add = [&](float t, int32_t k, float top_p, float min_p) {
    SampleCase c;
    c.p.temperature = t, c.p.top_k = k, c.p.top_p = top_p, c.p.min_p = min_p, c.p.logprobs = 1;
    c.seed = g_rng();
    cases.push_back(c);
    return &cases.back();
  };
  for (float t : {0.3f, 1.f, 2.f})
    for (int32_t k : {1, 40, 0})
      for (float top_p : {0.9f, 1.f})
        for (float min_p : {0.f, 0.05f}) add(t, k, top_p, min_p);
  add(0.f, 0, 1.f, 0.f);
  add(-1.f, 40, 0.5f, 0.1f);
  add(1.f, 5000, 1.f, 0.f);
  add(0.7f, std::max(1, vocab / 2), 0.95f, 0.f);
  add(1.f, 0, 0.f, 0.f);
  add(1.f, 0, 1.f, 1.f);
  add(1e-39f, 0, 1.f, 0.f);  // 1 / t overflows: greedy
  add(1e-30f, 0, 1.f, 0.f);  // finite 1 / t: everything below the max weighs nothing
  add(1.f, 0, NAN, NAN);
  add(0.8f, -3, 1.f, 0.f);
  add(1.f, vocab - 1, 0.9f, 0.f);
  add(1.5f, 0, 1.f, 0.f)->seed = edge.lo;
  add(1.5f, 0, 1.f, 0.f)->seed = edge.hi;
  add(1.f, 40, 0.95f, 0.f)->seed = edge.hi;
  for (double u : {0.0, 0x1.fffffffffffffp-1}) {
    SampleCase *c = add(1.f, 0, 1.f, 0.f);
    c->exact_u = true, c->u = u;
    c = add(0.9f, 0, 0.9f, 0.02f);
    c->exact_u = true, c->u = u;
  }
  return cases;
}

// Runs Ops::sample over n rows of the given kinds (each group of 4 rows shares its logits) with the cases'
// parameters, twice (the same outputs both times), and checks every row as the comment above says.
void check_sample_batch(Env &env, cuda::Ops &ops, int32_t vocab, int64_t n, int64_t ld, int64_t offset,
                        const std::vector<int> &kinds, const std::vector<SampleCase> &cases, const std::string &name) {
  check_case(env, name, [&](std::string &why) {
    std::vector<float> host(size_t(offset + n * ld + 64), 1e30f);  // gaps and the tail win if read
    float *rows = host.data() + offset;
    for (int64_t r = 0; r < n; ++r) {
      if (r % 4 == 0) fill_sample_row(rows + r * ld, vocab, kinds[size_t(r / 4) % kinds.size()]);
      else std::copy_n(rows + (r - 1) * ld, vocab, rows + r * ld);
    }
    std::vector<cuda::SampleRow> params(static_cast<size_t>(n));
    std::vector<double> us(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
      const SampleCase &c = cases[size_t(r) % cases.size()];
      Rng rng(c.seed);
      us[size_t(r)] = c.exact_u ? c.u : c.p.temperature > 0.f ? rng.uniform() : 0.0;
      params[size_t(r)] = {us[size_t(r)], c.p.temperature, c.p.top_k, c.p.top_p, c.p.min_p};
    }
    DeviceBuffer dl = upload_raw(host), dp = upload_raw(params);
    const size_t guard = 16;
    DeviceBuffer ids(size_t(n + guard) * 4), lps(size_t(n + guard) * 4), ids2(ids.bytes()), lps2(lps.bytes());
    for (DeviceBuffer *b : {&ids, &lps, &ids2, &lps2}) b->fill_bytes(env.stream.get(), 0xff);
    const CUdeviceptr lp = dl.ptr() + CUdeviceptr(offset * 4);
    ops.sample(env.stream.get(), lp, n, vocab, ld, dp.ptr(), ids.ptr(), lps.ptr());
    ops.sample(env.stream.get(), lp, n, vocab, ld, dp.ptr(), ids2.ptr(), lps2.ptr());
    env.stream.synchronize();
    std::vector<int32_t> got_id(size_t(n + guard)), again_id(got_id.size());
    std::vector<float> got_lp(got_id.size()), again_lp(got_id.size());
    ids.download(env.stream.get(), got_id.data(), ids.bytes());
    lps.download(env.stream.get(), got_lp.data(), lps.bytes());
    ids2.download(env.stream.get(), again_id.data(), ids2.bytes());
    lps2.download(env.stream.get(), again_lp.data(), lps2.bytes());
    for (size_t i = size_t(n); i < got_id.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &got_lp[i], 4);
      if (got_id[i] != -1 || bits != 0xffffffffu) return why = "wrote past the end of the output", false;
    }
    if (std::memcmp(got_id.data(), again_id.data(), size_t(n) * 4) || std::memcmp(got_lp.data(), again_lp.data(), size_t(n) * 4))
      return why = "a second run gave other tokens or logprobs", false;
    SamplerScratch scratch;
    int ambiguous = 0, agree_anyway = 0;
    RowOrder order;
    for (int64_t r = 0; r < n; ++r) {
      if (r % 4 == 0) order = row_order(rows + r * ld, vocab);
      const float *x = rows + r * ld;
      const SampleCase &c = cases[size_t(r) % cases.size()];
      const int kind = kinds[size_t(r / 4) % kinds.size()];
      const int32_t id = got_id[size_t(r)];
      const auto where = [&] {
        return fmt("row %lld (kind %d, t %g, top_k %d, top_p %g, min_p %g, u %.17g)", (long long)r, kind,
                   double(c.p.temperature), c.p.top_k, double(c.p.top_p), double(c.p.min_p), us[size_t(r)]);
      };
      if (id < 0 || id >= vocab) return why = where() + fmt(": token %d out of range", id), false;
      const SampleRef ref = sample_ref(order, vocab, c.p, us[size_t(r)]);
      const double want_lp = ref_logprob(order, x, id);
      if (!(std::fabs(double(got_lp[size_t(r)]) - want_lp) <= 1e-5))
        return why = where() + fmt(": logprob %.9g of token %d, want %.9g", double(got_lp[size_t(r)]), id, want_lp), false;
      int32_t cpu = -1;
      if (!c.exact_u) {
        Rng rng(c.seed);
        const SampleResult res = sample(x, vocab, c.p, rng, scratch);
        cpu = res.token;
        if (cpu == id && !(std::fabs(double(got_lp[size_t(r)]) - double(res.logprob)) <= 1e-5))
          return why = where() + fmt(": logprob %.9g, the CPU's %.9g", double(got_lp[size_t(r)]), double(res.logprob)),
                 false;
      }
      if (ref.ambiguous) {
        ++ambiguous;
        agree_anyway += cpu == id;
        if (!std::binary_search(ref.plausible.begin(), ref.plausible.end(), id))
          return why = where() + fmt(": token %d is not a plausible one (ambiguous at %s; reference %d, CPU %d)", id,
                                     ref.why.c_str(), ref.token, cpu),
                 false;
        continue;
      }
      if (id != ref.token || (!c.exact_u && cpu != ref.token))
        return why = where() + fmt(": token %d, reference %d, CPU %d", id, ref.token, cpu), false;
    }
    std::printf("  %s: %lld rows, %d ambiguous (the GPU agreed with the CPU on %d of them)\n", name.c_str(),
                (long long)n, ambiguous, agree_anyway);
    if (ambiguous * 4 > n) return why = fmt("%d of %lld rows ambiguous: the bound is too loose to test", ambiguous, (long long)n), false;
    return true;
  });
}

void test_sample(Env &env, cuda::Ops &ops) {
  const EdgeSeeds edge = find_edge_seeds();
  std::vector<int> all(kSampleKinds);
  std::iota(all.begin(), all.end(), 0);
  for (int32_t vocab : {151936, 1000, 33}) {
    const std::vector<SampleCase> cases = sample_cases(vocab, edge);
    const int64_t n = int64_t(cases.size());  // one group of 4 rows per kind cycles through a quarter of them
    for (int kind : all) {
      if (g_small && vocab > 1000 && kind % 3) continue;
      // each kind over every case: the cases shift by 4 rows per group, so run 4 batches rotated by one
      for (int rot = 0; rot < 4; ++rot) {
        if (vocab > 1000 && rot > 0 && kind != 8 && kind != 13) continue;  // the big vocabulary: one rotation
        std::vector<SampleCase> rotated(cases.begin() + rot, cases.end());
        rotated.insert(rotated.end(), cases.begin(), cases.begin() + rot);
        check_sample_batch(env, ops, vocab, n, vocab, 0, {kind}, rotated,
                           fmt("sample vocab %d kind %d rotation %d", vocab, kind, rot));
      }
    }
    // the scalar path (rows not 16-byte aligned) and a padded row stride, kinds mixed
    check_sample_batch(env, ops, vocab, n, vocab + 3, 1, all, cases,
                       fmt("sample vocab %d ld %d (logits misaligned), kinds mixed", vocab, vocab + 3));
    check_sample_batch(env, ops, vocab, n, (vocab + 3) / 4 * 4 + 4, 0, all, cases,
                       fmt("sample vocab %d ld %d, kinds mixed", vocab, (vocab + 3) / 4 * 4 + 4));
  }
  // many rows in one launch
  if (!g_small) check_sample_batch(env, ops, 151936, 128, 151936, 0, all, sample_cases(151936, edge), "sample 128 rows x 151936");
  check_sample_batch(env, ops, 33, 256, 33, 0, all, sample_cases(33, edge), "sample 256 rows x 33");
  // greedy rows equal argmax's ids and (to 1e-6) logprobs
  check_case(env, "sample at temperature 0 equals argmax", [&](std::string &why) {
    const int32_t vocab = 151936;
    const int64_t n = 16;
    std::vector<float> host(size_t(n * vocab));
    for (int64_t r = 0; r < n; ++r) fill_sample_row(host.data() + r * vocab, vocab, int(r % kSampleKinds));
    std::vector<cuda::SampleRow> params(static_cast<size_t>(n), cuda::SampleRow{0.5, 0.f, 40, 0.9f, 0.05f});
    DeviceBuffer dl = upload_raw(host), dp = upload_raw(params);
    DeviceBuffer a(size_t(n) * 4), al(a.bytes()), b(a.bytes()), bl(a.bytes());
    ops.argmax(env.stream.get(), dl.ptr(), n, vocab, vocab, a.ptr(), al.ptr());
    ops.sample(env.stream.get(), dl.ptr(), n, vocab, vocab, dp.ptr(), b.ptr(), bl.ptr());
    env.stream.synchronize();
    std::vector<int32_t> ia(static_cast<size_t>(n)), ib(static_cast<size_t>(n));
    std::vector<float> la(static_cast<size_t>(n)), lb(static_cast<size_t>(n));
    a.download(env.stream.get(), ia.data(), a.bytes());
    al.download(env.stream.get(), la.data(), al.bytes());
    b.download(env.stream.get(), ib.data(), b.bytes());
    bl.download(env.stream.get(), lb.data(), bl.bytes());
    for (int64_t r = 0; r < n; ++r)
      if (ia[size_t(r)] != ib[size_t(r)] || !(std::fabs(la[size_t(r)] - lb[size_t(r)]) <= 1e-6))
        return why = fmt("row %lld: sample %d (%.9g), argmax %d (%.9g)", (long long)r, ib[size_t(r)],
                         double(lb[size_t(r)]), ia[size_t(r)], double(la[size_t(r)])),
               false;
    return true;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Logits processors on the GPU (Ops::apply_penalties) against apply_logits_processors on the host: every
// element bitwise equal (NaN: any NaN, as the GPU's arithmetic returns its canonical NaN), the gaps between
// rows untouched. Rows mix the penalties (repetition above and below 1, presence and frequency of either sign
// or off), prompts and outputs with repeated ids (ids seen only in the prompt, only in the output, in both),
// logit biases with repeated ids and -inf, logits with 0, -0, +-inf and NaN at seen ids; a row with nothing
// to do, and a launch without bias lists.
void test_penalties(Env &env, cuda::Ops &ops) {
  for (int32_t vocab : {151936, 33})
    for (int variant : {0, 1, 2})  // 1: rows padded and logits one element off 16-byte alignment; 2: no bias lists
      check_case(env, fmt("apply_penalties vocab %d%s", vocab, variant == 1 ? " (ld padded, misaligned)" : variant == 2 ? " (no bias lists)" : ""),
                 [&](std::string &why) {
        const int64_t n = 11, ld = variant == 1 ? vocab + 5 : vocab, offset = variant == 1 ? 1 : 0;
        std::vector<float> host(size_t(offset + n * ld + 16));
        for (float &v : host) v = float(uni(-10, 10));
        std::vector<float> want = host;
        std::vector<int32_t> counts;
        ProcessorLists lists;  // the engine's builder of the GPU's lists (logits_processors.h)
        const float reps[] = {1.f, 1.3f, 0.7f}, pres[] = {0.f, 0.6f, -0.4f}, freqs[] = {0.f, 0.25f, -0.1f};
        for (int64_t r = 0; r < n; ++r) {
          LogitsProcessors lp;
          lp.repetition_penalty = reps[r % 3];
          lp.presence_penalty = pres[(r / 3) % 3];
          lp.frequency_penalty = freqs[(r + r / 3) % 3];
          if (r == 0) lp.repetition_penalty = 1.f, lp.presence_penalty = 0.f, lp.frequency_penalty = 0.f;
          // ids from a small pool (many repeats), a few anywhere, and the last id
          const int32_t pool = std::min<int32_t>(vocab, 64);
          auto pick = [&] { return below(4) ? int32_t(below(pool)) * (vocab / pool) : below(5) ? int32_t(below(vocab)) : vocab - 1; };
          std::vector<int32_t> tokens;
          const int32_t n_prompt = r == 1 ? 0 : int32_t(below(300)), n_out = r == 2 ? 0 : int32_t(below(200));
          for (int32_t i = 0; i < n_prompt + n_out; ++i) tokens.push_back(pick());
          if (r > 0 && variant != 2) {
            for (int64_t b = below(7); b > 0; --b) {
              const int32_t id = pick();
              lp.logit_bias.push_back({id, float(uni(-5, 5))});
              if (below(3) == 0) lp.logit_bias.push_back({id, float(uni(-2, 2))});  // the same id again, later
            }
            if (r % 4 == 3) lp.logit_bias.push_back({pick(), -INFINITY});
          }
          float *x = host.data() + offset + r * ld;
          for (int s = 0; s < 6 && !tokens.empty(); ++s) {  // special values at seen ids
            const float special[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, -1e-30f};
            x[tokens[size_t(below(int64_t(tokens.size())))]] = special[s];
          }
          float *w = want.data() + offset + r * ld;
          std::copy_n(x, vocab, w);
          apply_logits_processors(lp, tokens, n_prompt, w, vocab, counts);
          lists.add(lp, tokens, n_prompt, vocab);
        }
        DeviceBuffer dl = upload_raw(host), dr = upload_raw(lists.rows), dso = upload_raw(lists.seen_offsets),
                     dsi = upload_raw(lists.seen_ids), dsc = upload_raw(lists.seen_counts),
                     dbo = upload_raw(lists.bias_offsets), dbi = upload_raw(lists.bias_ids),
                     dbv = upload_raw(lists.bias_values);
        ops.apply_penalties(env.stream.get(), dl.ptr() + CUdeviceptr(offset * 4), n, vocab, ld, dr.ptr(), dso.ptr(),
                            dsi.ptr(), dsc.ptr(), variant == 2 ? 0 : dbo.ptr(), dbi.ptr(), dbv.ptr());
        env.stream.synchronize();
        std::vector<float> got(host.size());
        dl.download(env.stream.get(), got.data(), dl.bytes());
        for (size_t i = 0; i < got.size(); ++i) {
          uint32_t a, b;
          std::memcpy(&a, &got[i], 4);
          std::memcpy(&b, &want[i], 4);
          if (a == b || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
          const int64_t r = (int64_t(i) - offset) / ld, id = (int64_t(i) - offset) % ld;
          return why = fmt("row %lld id %lld: %.9g (0x%08x), want %.9g (0x%08x)%s", (long long)r, (long long)id,
                           double(got[i]), a, double(want[i]), b, id >= vocab || i < size_t(offset) ? " (outside the rows)" : ""),
                 false;
        }
        return true;
      });
}


// ---------------------------------------------------------------------------------------------------------------
// Top-N logprobs on the GPU (Ops::top_logprobs) against the CPU sampler's top list (vt::sample at temperature 0
// with logprobs = N): the same ids in the same order, logprobs within 1e-5 (-inf where the CPU has -inf), and
// the entries past min(N, vocab) of each row and a guard past the last row untouched. Rows: every sample kind
// (ties, -inf/NaN/+inf rows, a dominant value whose runners-up lie far below it, runs of equal values longer
// than the GPU gathers at once), plus one with fewer finite values than N.
void test_top_logprobs(Env &env, cuda::Ops &ops) {
  for (int32_t vocab : {151936, 1000, 33, 7})
    for (int32_t top_n : {1, 5, 20})
      for (int variant : {0, 1}) {  // 1: rows padded and logits one element off 16-byte alignment
        if (g_small && vocab > 1000 && top_n != 20) continue;
        check_case(env, fmt("top_logprobs vocab %d top_n %d%s", vocab, top_n, variant ? " (ld padded, misaligned)" : ""),
                   [&](std::string &why) {
          const int64_t n = kSampleKinds + 1, ld = variant ? vocab + 3 : vocab, offset = variant;
          std::vector<float> host(size_t(offset + n * ld + 64), 1e30f);
          float *rows = host.data() + offset;
          for (int64_t r = 0; r < kSampleKinds; ++r) fill_sample_row(rows + r * ld, vocab, int(r));
          float *few = rows + kSampleKinds * ld;  // three finite values among -inf and NaN
          for (int32_t i = 0; i < vocab; ++i) few[i] = i % 3 ? -INFINITY : NAN;
          for (int j = 0; j < 3; ++j) few[below(vocab)] = float(uni(-2, 2));
          DeviceBuffer dl = upload_raw(host);
          const size_t guard = 16, total = size_t(n * top_n) + guard;
          DeviceBuffer ids(total * 4), lps(total * 4);
          ids.fill_bytes(env.stream.get(), 0xff);
          lps.fill_bytes(env.stream.get(), 0xff);
          ops.top_logprobs(env.stream.get(), dl.ptr() + CUdeviceptr(offset * 4), n, vocab, ld, top_n, ids.ptr(), lps.ptr());
          env.stream.synchronize();
          std::vector<int32_t> got_id(total);
          std::vector<float> got_lp(total);
          ids.download(env.stream.get(), got_id.data(), ids.bytes());
          lps.download(env.stream.get(), got_lp.data(), lps.bytes());
          auto untouched = [&](size_t i) {
            uint32_t bits;
            std::memcpy(&bits, &got_lp[i], 4);
            return got_id[i] == -1 && bits == 0xffffffffu;
          };
          for (size_t i = size_t(n * top_n); i < total; ++i)
            if (!untouched(i)) return why = "wrote past the end of the output", false;
          SamplerScratch scratch;
          Rng rng(1);
          SamplingParams p;
          p.logprobs = top_n;
          for (int64_t r = 0; r < n; ++r) {
            const SampleResult cpu = sample(rows + r * ld, vocab, p, rng, scratch);
            const int want_n = std::min(top_n, vocab);
            if (cpu.n_top != want_n) return why = fmt("the CPU gave %d entries, want %d", cpu.n_top, want_n), false;
            for (int j = 0; j < top_n; ++j) {
              const size_t i = size_t(r * top_n + j);
              if (j >= want_n) {
                if (!untouched(i)) return why = fmt("row %lld: entry %d past min(top_n, vocab) written", (long long)r, j), false;
                continue;
              }
              const double lp = got_lp[i], want = cpu.top_logprobs[j];
              const bool lp_ok = std::isinf(want) ? lp == want : std::fabs(lp - want) <= 1e-5;
              if (got_id[i] != cpu.top_ids[j] || !lp_ok)
                return why = fmt("row %lld entry %d: id %d logprob %.9g, the CPU's %d %.9g", (long long)r, j, got_id[i], lp,
                                 cpu.top_ids[j], want),
                       false;
            }
          }
          return true;
        });
      }
}


}  // namespace cuda_tests
