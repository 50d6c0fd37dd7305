// Checks the CPU Gated DeltaNet ops (backend/cpu/gated_delta.h) against the float64 references of gdn_reference.h
// (written straight from the definitions: transformers' torch_recurrent_gated_delta_rule, causal_conv1d_update,
// Qwen3_5RMSNormGated), on fresh random inputs (seed printed; VT_TEST_SEED=n replays one).
//
// Every batch is ragged: sequences of 1, 2, 3, 64, 65 and 130 rows side by side, some starting fresh and some
// continuing from a state, in slots that are neither consecutive nor ordered, with room between slots
// (slot_stride larger than a state). Fresh slots are filled with NaN beforehand, so an op that reads a fresh
// sequence's old state fails; slots no sequence names, and the gaps between slots, must come back untouched.
// Outputs are NaN-poisoned before each call, so an element left unwritten fails too.
//
// Prints one line per failing check and ends with "N passed, N failed"; exits non-zero on any failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "check.h"
#include "gdn_reference.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gated_delta.h"
#include "backend/cpu/thread_pool.h"

using namespace vt::cpu;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> randf(size_t n, double lo = -1, double hi = 1) {
  std::vector<float> v(n);
  for (auto &x : v) x = float(uni(lo, hi));
  return v;
}

std::vector<double> widen(const std::vector<float> &v) { return {v.begin(), v.end()}; }

// ---------------------------------------------------------------------------------------------------------
// One call's sequences and their slots.
struct Seq { int32_t len, slot; bool fresh; };

struct Batch {
  std::vector<int32_t> start, slot, fresh;
  explicit Batch(const std::vector<Seq> &seqs) : start{0} {
    for (const Seq &s : seqs) {
      start.push_back(start.back() + s.len);
      slot.push_back(s.slot);
      fresh.push_back(s.fresh);
    }
  }
  int32_t rows() const { return start.back(); }
  RecurrentBatch view() const { return {int32_t(slot.size()), start.data(), slot.data(), fresh.data()}; }
};

// Both state arrays of a layer as the ops see them (slots slot_stride floats apart, the tail of each slot
// unused), and the float64 reference's copy, indexed by slot.
struct States {
  int32_t n_slots;
  int64_t conv_floats, conv_stride, rec_floats, rec_stride;
  std::vector<float> conv, rec;
  std::vector<std::vector<double>> ref_conv, ref_rec;

  States(int32_t n, int64_t conv_n, int64_t rec_n)
      : n_slots(n), conv_floats(conv_n), conv_stride(conv_n + 5), rec_floats(rec_n), rec_stride(rec_n + 7),
        conv(randf(size_t(n * conv_stride))), rec(randf(size_t(n * rec_stride))), ref_conv(size_t(n)),
        ref_rec(size_t(n)) {
    for (int32_t s = 0; s < n; ++s) {
      ref_conv[size_t(s)].assign(&conv[size_t(s * conv_stride)], &conv[size_t(s * conv_stride + conv_n)]);
      ref_rec[size_t(s)].assign(&rec[size_t(s * rec_stride)], &rec[size_t(s * rec_stride + rec_n)]);
    }
  }
  // A fresh sequence's slot holds NaN for the op (it must not read it) and zeros for the reference.
  void start_fresh(const std::vector<Seq> &seqs) {
    for (const Seq &q : seqs) {
      if (!q.fresh) continue;
      std::fill_n(&conv[size_t(q.slot * conv_stride)], conv_floats, kNaN);
      std::fill_n(&rec[size_t(q.slot * rec_stride)], rec_floats, kNaN);
      std::fill(ref_conv[size_t(q.slot)].begin(), ref_conv[size_t(q.slot)].end(), 0.0);
      std::fill(ref_rec[size_t(q.slot)].begin(), ref_rec[size_t(q.slot)].end(), 0.0);
    }
  }
};

// ---------------------------------------------------------------------------------------------------------
// Float64 references: gdn_reference.h's, on the reference's copies of the states (States::ref_conv, ref_rec).

// The recurrence (gdn_ref::delta_rule), with each output's scale widened for the chunked form (below).
void ref_rule(const std::vector<double> &qkv, const std::vector<float> &g, const std::vector<float> &beta,
              const Batch &b, const GdnGeometry &geo, States &st, std::vector<double> &out,
              std::vector<double> &scale) {
  const int32_t dv = geo.v_dim, hv = geo.n_v_heads;
  gdn_ref::delta_rule(qkv, g, beta, b.start, b.slot, geo, st.ref_rec, out, scale);
  // The chunked form sums, for row t, terms from up to a chunk's rows back (decayed): its rounding follows the
  // largest of those rows' magnitudes, not row t's alone, which a strong decay can make tiny (the state
  // nearly reset). So each element's scale is the largest magnitude of its (head, channel) over the last
  // kDeltaRuleChunk rows of its sequence. The recurrent form's error follows its state, which is smaller.
  std::vector<double> local = scale;
  for (size_t s = 0; s + 1 < b.start.size(); ++s)
    for (int32_t t = b.start[s]; t < b.start[s + 1]; ++t)
      for (int32_t u = std::max(b.start[s], t - kDeltaRuleChunk + 1); u < t; ++u)
        for (int64_t e = 0; e < int64_t(hv) * dv; ++e)
          scale[size_t(t * int64_t(hv) * dv + e)] =
              std::max(scale[size_t(t * int64_t(hv) * dv + e)], local[size_t(u * int64_t(hv) * dv + e)]);
}

// Random q, k, v rows, and gates with the spread a real layer has: decays from barely (g = -1e-3) to nearly
// a reset (g = -8) per step, beta over all of (0, 1).
struct RuleInputs { std::vector<float> qkv, g, beta; };
RuleInputs rule_inputs(int32_t rows, const GdnGeometry &geo) {
  RuleInputs in{randf(size_t(rows * geo.qkv_dim())), std::vector<float>(size_t(rows * geo.n_v_heads)), {}};
  for (auto &x : in.g) x = float(-std::exp(uni(std::log(1e-3), std::log(8.0))));
  in.beta = randf(in.g.size(), 0, 1);
  return in;
}

// The op's states against the reference's, each head's state relative to its largest entry (the state is a
// sum of rank-1 updates: its rounding follows its magnitude, not each entry's). Also: untouched slots and the
// gaps between slots are bit-identical to before.
bool states_match(const States &st, const std::vector<float> &rec_before, const Batch &b, int64_t head_floats,
                  double tol, std::string *why) {
  std::vector<bool> used(size_t(st.n_slots), false);
  for (int32_t s : b.slot) used[size_t(s)] = true;
  for (int32_t slot = 0; slot < st.n_slots; ++slot) {
    const float *got = &st.rec[size_t(slot * st.rec_stride)];
    const float *was = &rec_before[size_t(slot * st.rec_stride)];
    if (std::memcmp(got + st.rec_floats, was + st.rec_floats, size_t(st.rec_stride - st.rec_floats) * 4) ||
        (!used[size_t(slot)] && std::memcmp(got, was, size_t(st.rec_floats) * 4))) {
      *why = "slot " + std::to_string(slot) + ": wrote outside the named slots";
      return false;
    }
    if (!used[size_t(slot)]) continue;
    const std::vector<double> &ref = st.ref_rec[size_t(slot)];
    std::vector<double> scale(ref.size());
    for (size_t h0 = 0; h0 < ref.size(); h0 += size_t(head_floats)) {
      double mx = 1e-30;
      for (size_t i = h0; i < h0 + size_t(head_floats); ++i) mx = std::max(mx, std::fabs(ref[i]));
      std::fill(scale.begin() + long(h0), scale.begin() + long(h0 + head_floats), mx);
    }
    if (!close(got, ref.data(), scale.data(), ref.size(), tol, why)) {
      *why = "slot " + std::to_string(slot) + " state: " + *why;
      return false;
    }
  }
  return true;
}

// Tolerances, against the float64 references (worst measured over 12 seeds, scalar and AVX2 paths, in
// brackets):
//  - conv, gates: a handful of fp32 roundings per element, each <= 6e-8 of the magnitude summed [2.4e-7]:
//    1e-6 leaves room without letting a wrong tap, weight or gate (errors of order 1e-3 to 1) through.
//  - gated_rmsnorm: the sum of dim squares rounds at up to dim · 6e-8 worst case (dim 128: 8e-6; typically
//    sqrt(dim) of that) [3e-7]: 1e-5, as test_cpu_ops allows rmsnorm.
//  - delta rule: each row rounds the state at ~1e-7 of its magnitude, and the per-row map (decay, then
//    I - beta k kᵀ with |k| = 1) has norm <= 1, so old errors shrink or stay instead of compounding: the
//    recurrent form stays near fp32 resolution over any length [4e-7 outputs, 2.4e-7 states]. The chunked
//    form sums up to 64 terms e^{γ_i-γ_j} (q_i·k_j) δ_j that cancel to the output, and solves a triangular
//    system whose rounding follows the δ_j (of order |v|) rather than the output, so it sits ~20x higher
//    [5.7e-6 vs float64, 1e-5 between two fp32 runs that chunk differently]. 5e-5 is 5x that, and still
//    catches any algebra slip: a missed decay, a wrong key head or a 1e-4 change in one substitution term
//    each fail (checked by mutating the op).
constexpr double kTolPointwise = 1e-6;
constexpr double kTolNorm = 1e-5;
constexpr double kTolRule = 5e-5;

// ---------------------------------------------------------------------------------------------------------
void test_conv(ThreadPool &pool, int64_t C, int32_t W) {
  // Lengths shorter than the history (1, 2) make the state shift in place; 64, 65, 130 cross channel
  // blocks of rows; fresh and continuing sequences mixed, slots out of order with gaps (slots 1, 4, 8 unused).
  const std::vector<Seq> seqs = {{1, 5, false}, {3, 0, true}, {64, 7, false}, {2, 2, false},
                                 {65, 3, true}, {130, 6, false}, {1, 9, true}};
  States st(10, (W - 1) * C, 1);
  st.start_fresh(seqs);
  const Batch b(seqs);
  auto x = randf(size_t(b.rows() * C), -2, 2), w = randf(size_t(C * W));
  std::vector<float> out(x.size(), kNaN), before = st.conv;
  causal_conv1d_silu(pool, x.data(), b.view(), C, W, w.data(), st.conv.data(), st.conv_stride, out.data());
  std::vector<double> ref, scale;
  gdn_ref::conv(widen(x), C, b.start, b.slot, C, W, w, st.ref_conv, ref, scale);
  std::string why, name = "causal_conv1d_silu C=" + std::to_string(C) + " W=" + std::to_string(W) +
                          " threads=" + std::to_string(pool.size());
  bool ok = close(out.data(), ref.data(), scale.data(), out.size(), kTolPointwise, &why);
  std::vector<bool> used(size_t(st.n_slots), false);
  for (const Seq &q : seqs) used[size_t(q.slot)] = true;
  for (int32_t s = 0; s < st.n_slots && ok; ++s) {  // histories are copies of inputs: exact
    const float *got = &st.conv[size_t(s * st.conv_stride)];
    const float *was = &before[size_t(s * st.conv_stride)];
    const int64_t n = (W - 1) * C;
    for (int64_t i = 0; i < n && ok; ++i)
      if (!(got[i] == (used[size_t(s)] ? float(st.ref_conv[size_t(s)][size_t(i)]) : was[i])))
        ok = false, why = "conv state of slot " + std::to_string(s) + " element " + std::to_string(i);
    if (ok && std::memcmp(got + n, was + n, size_t(st.conv_stride - n) * 4))
      ok = false, why = "wrote past the state into the gap after slot " + std::to_string(s);
  }
  record(ok, name, why);
}

void test_gates() {
  const int64_t T = 37;
  const int32_t hv = 6;
  auto b = randf(size_t(T * hv), -10, 10), a = randf(b.size(), -10, 10), dt_bias = randf(size_t(hv), -2, 2);
  a[0] = 30, a[1] = -30, a[2] = float(20 - dt_bias[2]) + 0.01f;  // softplus past its threshold, deep below 0
  std::vector<float> A_log(static_cast<size_t>(hv));
  for (auto &x : A_log) x = float(uni(std::log(0.01), std::log(16.0)));  // transformers' init range of A
  std::vector<float> beta(b.size(), kNaN), g(b.size(), kNaN);
  gdn_gates(b.data(), a.data(), T, hv, A_log.data(), dt_bias.data(), beta.data(), g.data());
  std::vector<double> rb, rg, sb(b.size()), sg(b.size());
  gdn_ref::gates(b.data(), a.data(), T, hv, A_log.data(), dt_bias.data(), rb, rg);
  for (size_t i = 0; i < b.size(); ++i) sb[i] = std::fabs(rb[i]), sg[i] = std::fabs(rg[i]);
  std::string why;
  record(close(beta.data(), rb.data(), sb.data(), rb.size(), kTolPointwise, &why), "gdn_gates beta", why);
  record(close(g.data(), rg.data(), sg.data(), rg.size(), kTolPointwise, &why), "gdn_gates g", why);
}

void test_gated_rmsnorm(ThreadPool &pool) {
  for (int64_t dim : {8, 13, 128})
    for (bool in_place : {false, true}) {
      const int64_t rows = 5 * 6;  // T = 5 rows of Hv = 6 heads
      const float eps = 1e-6f;
      auto x = randf(size_t(rows * dim), -3, 3), z = randf(x.size(), -6, 6), w = randf(size_t(dim), 0.2, 2);
      std::vector<double> ref, scale(x.size());
      gdn_ref::gated_rmsnorm(x.data(), z.data(), rows, dim, w.data(), eps, ref);
      for (size_t e = 0; e < ref.size(); ++e) scale[e] = std::fabs(ref[e]);
      std::vector<float> out = in_place ? x : std::vector<float>(x.size(), kNaN);
      gated_rmsnorm(pool, in_place ? out.data() : x.data(), z.data(), rows, dim, w.data(), eps, out.data());
      std::string why;
      record(close(out.data(), ref.data(), scale.data(), out.size(), kTolNorm, &why),
             "gated_rmsnorm dim=" + std::to_string(dim) + (in_place ? " in place" : ""), why);
    }
}

const char *path_name(DeltaRulePath p) {
  return p == DeltaRulePath::Recurrent ? "recurrent" : p == DeltaRulePath::Chunked ? "chunked" : "auto";
}

std::string geo_name(const GdnGeometry &geo) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "Hk=%d Hv=%d Dk=%d Dv=%d", geo.n_k_heads, geo.n_v_heads, geo.k_dim, geo.v_dim);
  return buf;
}

// One call over a ragged batch, on each path, against the float64 recurrence.
void test_rule(ThreadPool &pool, const GdnGeometry &geo) {
  const std::vector<Seq> seqs = {{65, 4, true}, {1, 0, false}, {130, 2, false}, {3, 6, true},
                                 {64, 1, false}, {2, 7, false}, {1, 3, true}};  // slot 5 unused
  const Batch b(seqs);
  const RuleInputs in = rule_inputs(b.rows(), geo);
  for (DeltaRulePath path : {DeltaRulePath::Recurrent, DeltaRulePath::Chunked, DeltaRulePath::Auto}) {
    States st(8, 1, geo.state_floats());
    st.start_fresh(seqs);
    std::vector<float> before = st.rec, out(size_t(b.rows()) * geo.n_v_heads * geo.v_dim, kNaN);
    gated_delta_rule(pool, in.qkv.data(), in.g.data(), in.beta.data(), b.view(), geo, st.rec.data(), st.rec_stride,
                     out.data(), path);
    std::vector<double> ref, scale;
    ref_rule(widen(in.qkv), in.g, in.beta, b, geo, st, ref, scale);
    std::string why, name = std::string("gated_delta_rule ") + path_name(path) + " " + geo_name(geo) +
                            " threads=" + std::to_string(pool.size());
    record(close(out.data(), ref.data(), scale.data(), out.size(), kTolRule, &why), name + " output", why);
    record(states_match(st, before, b, int64_t(geo.k_dim) * geo.v_dim, kTolRule, &why), name + " state", why);
  }
}

// Chunked against recurrent directly, on one long sequence of the same inputs from the same state: the two
// forms of one recurrence agree to fp32 rounding, whatever the reference says.
void test_chunked_vs_recurrent(ThreadPool &pool, const GdnGeometry &geo, int32_t len) {
  const std::vector<Seq> seqs = {{len, 1, false}};
  const Batch b(seqs);
  const RuleInputs in = rule_inputs(len, geo);
  const std::vector<float> state0 = randf(size_t(2 * geo.state_floats()), -0.5, 0.5);
  std::vector<float> outs[2], states[2];
  for (int i = 0; i < 2; ++i) {
    states[i] = state0;
    outs[i].assign(size_t(len) * geo.n_v_heads * geo.v_dim, kNaN);
    gated_delta_rule(pool, in.qkv.data(), in.g.data(), in.beta.data(), b.view(), geo, states[i].data(),
                     geo.state_floats(), outs[i].data(), i ? DeltaRulePath::Chunked : DeltaRulePath::Recurrent);
  }
  // Scale: the largest recurrent output (resp. state entry) of each head over the whole run, the size that
  // fp32 rounding in either form follows.
  auto per_head_max = [&](const std::vector<float> &v, int64_t inner) {
    std::vector<double> ref(v.begin(), v.end()), mx(size_t(geo.n_v_heads), 1e-30), scale(v.size());
    auto head = [&](size_t i) { return (i / size_t(inner)) % size_t(geo.n_v_heads); };
    for (size_t i = 0; i < v.size(); ++i) mx[head(i)] = std::max(mx[head(i)], std::fabs(ref[i]));
    for (size_t i = 0; i < v.size(); ++i) scale[i] = mx[head(i)];
    return std::make_pair(ref, scale);
  };
  auto [oref, oscale] = per_head_max(outs[0], geo.v_dim);
  auto [sref, sscale] = per_head_max(states[0], int64_t(geo.k_dim) * geo.v_dim);
  std::string why, name = "chunked == recurrent " + geo_name(geo) + " rows=" + std::to_string(len);
  record(close(outs[1].data(), oref.data(), oscale.data(), oref.size(), kTolRule, &why), name + " output", why);
  record(close(states[1].data(), sref.data(), sscale.data(), sref.size(), kTolRule, &why), name + " state", why);
}

// State carried across calls, through conv and rule together (the layer's pipeline, Auto path): each sequence
// fed in pieces over five calls (a prefill in two chunks, then decodes, some sequences absent from some calls)
// gives what one call over its whole rows gives, and both match the float64 pipeline.
void test_carried_state(ThreadPool &pool, const GdnGeometry &geo, int32_t W) {
  using Plan = gdn_ref::CarriedPlan;
  const std::vector<Plan> &plans = gdn_ref::carried_plans();
  const size_t n_calls = plans[0].parts.size();
  const int64_t C = geo.qkv_dim(), hv = geo.n_v_heads, row_out = hv * int64_t(geo.v_dim);
  std::vector<int32_t> total(plans.size(), 0);
  std::vector<Seq> whole;
  for (size_t s = 0; s < plans.size(); ++s) {
    for (int32_t n : plans[s].parts) total[s] += n;
    whole.push_back({total[s], plans[s].slot, plans[s].fresh});
  }
  const Batch wb(whole);
  // Inputs in the one-call layout; a piece's rows are copied out of them.
  const std::vector<float> x = randf(size_t(wb.rows() * C), -2, 2), w = randf(size_t(C * W));
  const std::vector<float> gb = rule_inputs(wb.rows(), geo).g;
  const std::vector<float> beta = randf(gb.size(), 0, 1);

  States st0(8, (W - 1) * C, geo.state_floats());
  st0.start_fresh(whole);

  auto run = [&](States &st, const Batch &b, const float *xx, const float *gg, const float *bb, float *out) {
    std::vector<float> qkv(size_t(b.rows() * C), kNaN);
    causal_conv1d_silu(pool, xx, b.view(), C, W, w.data(), st.conv.data(), st.conv_stride, qkv.data());
    gated_delta_rule(pool, qkv.data(), gg, bb, b.view(), geo, st.rec.data(), st.rec_stride, out);
  };
  States one = st0;
  std::vector<float> out_one(size_t(wb.rows() * row_out), kNaN);
  run(one, wb, x.data(), gb.data(), beta.data(), out_one.data());

  States split = st0;
  std::vector<float> out_split(out_one.size(), kNaN);
  std::vector<int32_t> done(plans.size(), 0);
  for (size_t k = 0; k < n_calls; ++k) {
    std::vector<Seq> seqs;
    std::vector<size_t> who;
    for (size_t s = 0; s < plans.size(); ++s)
      if (plans[s].parts[k]) seqs.push_back({plans[s].parts[k], plans[s].slot, plans[s].fresh && !done[s]}),
                             who.push_back(s);
    const Batch b(seqs);
    std::vector<float> xx, gg, bb, out(size_t(b.rows() * row_out), kNaN);
    for (size_t i = 0; i < who.size(); ++i) {  // gather this call's rows of each sequence
      const int64_t r0 = wb.start[who[i]] + done[who[i]], r1 = r0 + seqs[i].len;
      xx.insert(xx.end(), x.begin() + r0 * C, x.begin() + r1 * C);
      gg.insert(gg.end(), gb.begin() + r0 * hv, gb.begin() + r1 * hv);
      bb.insert(bb.end(), beta.begin() + r0 * hv, beta.begin() + r1 * hv);
    }
    run(split, b, xx.data(), gg.data(), bb.data(), out.data());
    for (size_t i = 0; i < who.size(); ++i) {  // scatter its outputs back to the one-call layout
      const int64_t r0 = wb.start[who[i]] + done[who[i]];
      std::copy_n(out.begin() + b.start[i] * row_out, seqs[i].len * row_out, out_split.begin() + r0 * row_out);
      done[who[i]] += seqs[i].len;
    }
  }

  std::vector<double> qkv_ref, conv_scale, ref, scale;
  States expect = st0;  // the reference runs on its copies of the starting states
  gdn_ref::conv(widen(x), C, wb.start, wb.slot, C, W, w, expect.ref_conv, qkv_ref, conv_scale);
  ref_rule(qkv_ref, gb, beta, wb, geo, expect, ref, scale);

  std::string why, name = "carried state, conv + rule over 5 calls " + geo_name(geo) + " W=" + std::to_string(W) +
                          " threads=" + std::to_string(pool.size());
  record(close(out_one.data(), ref.data(), scale.data(), ref.size(), kTolRule, &why), name + ": one call vs f64", why);
  record(close(out_split.data(), ref.data(), scale.data(), ref.size(), kTolRule, &why), name + ": 5 calls vs f64",
         why);
  std::vector<double> one_out(out_one.begin(), out_one.end());
  record(close(out_split.data(), one_out.data(), scale.data(), ref.size(), kTolRule, &why),
         name + ": 5 calls vs one call", why);
  // Final states. Conv histories are copies of inputs: exactly the reference's, and the same both ways.
  bool conv_ok = split.conv == one.conv;
  for (const Seq &q : whole)
    conv_ok &= std::equal(expect.ref_conv[size_t(q.slot)].begin(), expect.ref_conv[size_t(q.slot)].end(),
                          split.conv.begin() + q.slot * split.conv_stride);
  record(conv_ok, name + ": conv states");
  split.ref_rec = expect.ref_rec;
  record(states_match(split, st0.rec, wb, int64_t(geo.k_dim) * geo.v_dim, kTolRule, &why), name + ": 5 calls state",
         why);
}

}  // namespace

int main() {
  uint64_t seed = std::random_device{}();
  if (const char *s = std::getenv("VT_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  g_rng.seed(seed);
  std::printf("test_cpu_gdn: seed %llu (VT_TEST_SEED=%llu replays it)\n", (unsigned long long)seed,
              (unsigned long long)seed);
  ThreadPool pool1(1), pool3(3);
  const GdnGeometry ragged{2, 6, 16, 8}, wide_v{1, 3, 8, 24}, square{2, 2, 32, 32};
  const GdnGeometry qwen27b{16, 48, 128, 128};  // Qwen3.5-27B; the smaller models have Hv = 32

  test_gates();
  for (ThreadPool *pool : {&pool1, &pool3}) {
    for (int32_t W : {4, 2, 1}) test_conv(*pool, ragged.qkv_dim(), W);
    test_conv(*pool, 100, 4);  // C not a multiple of the op's 64-channel blocks
    test_gated_rmsnorm(*pool);
  }
  // The delta rule's inner loops are per-ISA kernels: every path this CPU has.
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (!set_isa(isa)) continue;
    std::printf("  delta rule on the %s path\n", isa_name(isa));
    for (ThreadPool *pool : {&pool1, &pool3}) {
      for (const GdnGeometry &geo : {ragged, wide_v, square}) test_rule(*pool, geo);
      test_carried_state(*pool, ragged, 4);
    }
    test_rule(pool3, qwen27b);
    test_carried_state(pool3, GdnGeometry{16, 32, 128, 128}, 4);
    for (int32_t len : {64, 65, 200, 1000}) test_chunked_vs_recurrent(pool3, ragged, len);
    test_chunked_vs_recurrent(pool3, qwen27b, 300);
  }

  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
