// CUDA op checks: the Gated DeltaNet ops (backend/cuda/gated_delta_ops.h) against the CPU ops (backend/cpu/
// gated_delta.h, the recurrent path of the delta rule: the form the kernel computes) and against the float64
// references of gdn_reference.h (from the definitions: transformers' causal_conv1d_update,
// torch_recurrent_gated_delta_rule, Qwen3_5RMSNormGated; test_cpu_gdn.cpp checks against the same), in both
// activation types.
//
// Batches are ragged as in test_cpu_gdn: sequences of 0, 1, 2, 3, 64, 65 and 130 rows side by side, fresh and
// continuing, in slots neither consecutive nor ordered with room between them (slot_stride larger than a state).
// Fresh slots hold NaN (an op that reads a fresh sequence's old state fails), outputs are NaN-poisoned with a
// guard, and slots no sequence names, and the gaps between slots, must come back bit for bit. The conv runs with
// the rows per thread it picks and with forced ones (1, 2, 3, 64: a sequence's first rows then belong to another
// chunk than its later ones, and chunks end inside sequences), the delta rule on the 27B geometry (Hk 16, Hv 48, Dk = Dv = 128) and small ragged
// ones (Dv not a multiple of the kernel's 32 columns, Dk below 128). A sequence fed in pieces over five calls
// (a prefill in two chunks, then decodes) must give what one call gives, and one decode step captured in a CUDA
// graph must replay for new slots and first positions (pos0 == 0: fresh). Padding sequences (slot -1, a decode
// graph's rows past its batch) run from zero states and leave every slot as it was. Every case's name has "gdn" in it (VT_TEST_ONLY=gdn runs them).
#include <cstring>

#include "../cuda_check.h"
#include "../gdn_reference.h"
#include "backend/cpu/gated_delta.h"
#include "backend/cuda/gated_delta_ops.h"

namespace cuda_tests {

namespace {

using cpu::GdnGeometry;
using cuda::GatedDeltaOps;

// ---------------------------------------------------------------------------------------------------------------
// A batch's sequences, their metadata on the host (for the CPU op) and on the device.
struct Seq {
  int32_t len, slot;
  bool fresh;
};

// The device reads freshness from each sequence's first position (pos0 == 0: fresh); a continuing one gets some
// later position.
struct GdnBatch {
  std::vector<int32_t> start{0}, slot, fresh, pos0;
  DeviceBuffer d_start, d_slot, d_pos0;
  explicit GdnBatch(const std::vector<Seq> &seqs) {
    for (const Seq &s : seqs) {
      start.push_back(start.back() + s.len);
      slot.push_back(s.slot);
      fresh.push_back(s.fresh);
      pos0.push_back(s.fresh ? 0 : 1 + int32_t(below(5000)));
    }
    d_start = upload_raw(start), d_slot = upload_raw(slot), d_pos0 = upload_raw(pos0);
  }
  int32_t n() const { return int32_t(slot.size()); }
  int32_t rows() const { return start.back(); }
  cpu::RecurrentBatch host() const { return {n(), start.data(), slot.data(), fresh.data()}; }
  cuda::DeviceRecurrentBatch dev() const { return {n(), d_start.ptr(), d_slot.ptr(), d_pos0.ptr()}; }
};

// One state array as the ops see it: n slots of `floats` values, stride floats apart (a gap of 7 after each),
// random, fresh slots NaN; and the float64 reference's copy of each slot (fresh ones zero).
struct Slots {
  int32_t n;
  int64_t floats, stride;
  std::vector<float> v;
  std::vector<std::vector<double>> ref;
  Slots(int32_t n_slots, int64_t n_floats, const std::vector<Seq> &seqs)
      : n(n_slots), floats(n_floats), stride(n_floats + 7), v(rand_act(size_t(n_slots * stride), Act::F32)),
        ref(size_t(n_slots)) {
    for (int32_t s = 0; s < n; ++s) ref[size_t(s)].assign(&v[size_t(s * stride)], &v[size_t(s * stride + floats)]);
    for (const Seq &q : seqs)
      if (q.fresh) {
        std::fill_n(&v[size_t(q.slot * stride)], floats, NAN);
        std::fill(ref[size_t(q.slot)].begin(), ref[size_t(q.slot)].end(), 0.0);
      }
  }
};

std::vector<float> download_f32(const DeviceBuffer &b, size_t n) {
  std::vector<float> v(n);
  b.download(g_stream, v.data(), n * 4);
  return v;
}

// |got - ref| <= tol_scale · scale + tol_rel · |ref| everywhere and nothing NaN (float64 references: scale is the
// magnitude of what was summed, tol_rel the output's own rounding).
bool close_f64(const std::vector<float> &got, const std::vector<double> &ref, const std::vector<double> &scale,
               double tol_scale, double tol_rel, std::string *why) {
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return *why = fmt("element %zu is NaN (unwritten, or a fresh slot's state was read)", i), false;
    const double r = std::fabs(got[i] - ref[i]) / (tol_scale * scale[i] + tol_rel * std::fabs(ref[i]) + 1e-30);
    if (r > worst_ratio) worst_ratio = r, worst = i;
  }
  if (worst_ratio <= 1) return true;
  *why = fmt("vs float64, element %zu: got %.9g want %.9g (error %.3g x the bound)", worst, double(got[worst]),
             ref[worst], worst_ratio);
  return false;
}

// Slot by slot: each named slot's `floats` values against want (per head of head_floats values, |got - want| <= tol
// · the head's largest |want|: a state's rounding follows its magnitude; tol 0: bit for bit), every other slot
// and every gap bit for bit as before.
template <class Want>
bool slots_match(const std::vector<float> &got, const Slots &st, const std::vector<float> &before,
                 const std::vector<int32_t> &named, Want want, int64_t head_floats, double tol, const char *what,
                 std::string *why) {
  std::vector<bool> used(size_t(st.n), false);
  for (int32_t s : named) used[size_t(s)] = true;
  for (int32_t s = 0; s < st.n; ++s) {
    const float *g = &got[size_t(s * st.stride)], *b = &before[size_t(s * st.stride)];
    if (std::memcmp(g + st.floats, b + st.floats, size_t(st.stride - st.floats) * 4) ||
        (!used[size_t(s)] && std::memcmp(g, b, size_t(st.floats) * 4)))
      return *why = fmt("%s: slot %d: written outside the named slots' states", what, s), false;
    if (!used[size_t(s)]) continue;
    for (int64_t h0 = 0; h0 < st.floats; h0 += head_floats) {
      double mx = 0;
      for (int64_t i = h0; i < h0 + head_floats; ++i) mx = std::max(mx, std::fabs(double(want(s, i))));
      for (int64_t i = h0; i < h0 + head_floats; ++i) {
        const double w = want(s, i);
        if (std::isnan(g[i]) || std::isnan(w) || std::fabs(g[i] - w) > tol * mx)
          return *why = fmt("%s: slot %d element %lld: got %.9g want %.9g (head max %.3g)", what, s, (long long)i,
                            double(g[i]), w, mx),
                 false;
      }
    }
  }
  return true;
}

// Rounding of an output in the activation type, relative to itself: fp32's elementwise functions (expf, a few
// ulp), bf16's rounding (2^-9, doubled).
double out_rel(Act act) { return act == Act::F32 ? 1e-6 : 0x1p-8; }

// ---------------------------------------------------------------------------------------------------------------
// Inputs. (The float64 references are gdn_reference.h's, run on Slots::ref, the reference's copies of the states.)

// Rule inputs with a real layer's spread: decays from barely (g = -1e-3) to nearly a reset (g = -8) per row, beta
// over (0, 1); q, k, v representable in the activation type.
struct RuleInputs {
  std::vector<float> qkv, g, beta;
};
RuleInputs rule_inputs(int32_t rows, const GdnGeometry &geo, Act act) {
  RuleInputs in{rand_act(size_t(rows * geo.qkv_dim()), act), std::vector<float>(size_t(rows * geo.n_v_heads)), {}};
  for (auto &x : in.g) x = float(-std::exp(uni(std::log(1e-3), std::log(8.0))));
  in.beta = rand_act(in.g.size(), Act::F32, 0, 1);
  return in;
}

std::string geo_name(const GdnGeometry &geo) {
  return fmt("Hk %d Hv %d Dk %d Dv %d", geo.n_k_heads, geo.n_v_heads, geo.k_dim, geo.v_dim);
}

// Tolerances. Against the CPU op: the harness's tol_for (1e-5 fp32, 1e-2 bf16, of |ref| + the outputs' rms). Against
// float64, of the magnitude summed: the conv's few roundings 1e-6 (test_cpu_gdn's); the recurrence's 1e-5 (each row
// rounds the state at ~1e-7 of its size and the per-row map does not grow errors: the CPU's recurrent form
// measured 4e-7); its states 1e-5 of each head's largest entry. Conv states are copies of inputs: bit for bit.
constexpr double kTolConv = 1e-6, kTolRule = 1e-5, kTolNorm = 1e-5, kTolGates = 2e-6;

// ---------------------------------------------------------------------------------------------------------------
void test_gates(Env &env, GatedDeltaOps &gops) {
  const Act act = gops.act();
  struct Case { int64_t T; int32_t hv; bool fused; };  // fused: b and a are columns of one wider row
  for (const Case &cs : {Case{37, 6, false}, Case{5, 48, true}, Case{130, 32, true}})
    check_case(env, fmt("gdn_gates[%s] T %lld Hv %d%s", cuda::act_name(act), (long long)cs.T, cs.hv,
                        cs.fused ? " b|a in wider rows" : ""),
               [&](std::string &why) {
                 const int64_t T = cs.T, hv = cs.hv, ld = cs.fused ? 2 * hv + 5 : hv, n = T * hv;
                 // b's rows (with a's after them when fused), and a's own rows when not
                 auto rows = rand_act(size_t(T * ld), act, -10, 10);
                 std::vector<float> a_sep = cs.fused ? std::vector<float>() : rand_act(size_t(n), act, -10, 10);
                 std::vector<float> &a_rows = cs.fused ? rows : a_sep;
                 const int64_t a_off = cs.fused ? hv : 0;
                 a_rows[size_t(a_off)] = 30, a_rows[size_t(a_off + 1)] = -30;  // softplus past its threshold, far below 0
                 auto dt_bias = rand_act(size_t(hv), Act::F32, -2, 2), A_log = std::vector<float>(size_t(hv));
                 for (auto &x : A_log) x = float(uni(std::log(0.01), std::log(16.0)));  // transformers' init range
                 std::vector<float> b(static_cast<size_t>(n)), a(static_cast<size_t>(n));  // the CPU op's contiguous (T, Hv)
                 for (int64_t t = 0; t < T; ++t)
                   for (int64_t h = 0; h < hv; ++h)
                     b[size_t(t * hv + h)] = rows[size_t(t * ld + h)], a[size_t(t * hv + h)] = a_rows[size_t(t * ld + a_off + h)];
                 Dev db = upload_act(rows, act), da = cs.fused ? Dev{} : upload_act(a_rows, act);
                 DeviceBuffer dA = upload_raw(A_log), ddt = upload_raw(dt_bias);
                 Dev beta = poisoned(size_t(n), Act::F32), g = poisoned(size_t(n), Act::F32);
                 const CUdeviceptr pa = cs.fused ? db.ptr() + CUdeviceptr(a_off * int64_t(cuda::act_size(act))) : da.ptr();
                 gops.gdn_gates(env.stream.get(), db.ptr(), pa, T, cs.hv, dA.ptr(), ddt.ptr(), beta.ptr(), g.ptr(),
                                cs.fused ? ld : 0);
                 env.stream.synchronize();
                 std::vector<float> cb(static_cast<size_t>(n)), cg(static_cast<size_t>(n));
                 cpu::gdn_gates(b.data(), a.data(), T, cs.hv, A_log.data(), dt_bias.data(), cb.data(), cg.data());
                 std::vector<double> rb, rg, sb(size_t(n), 0), sg(size_t(n), 0);
                 gdn_ref::gates(b.data(), a.data(), T, cs.hv, A_log.data(), dt_bias.data(), rb, rg);
                 bool gb = false, gg = false;
                 const auto got_b = download(beta, &gb), got_g = download(g, &gg);
                 if (!close(got_b, cb, kTolGates, gb, &why)) return why = "beta vs CPU: " + why, false;
                 if (!close(got_g, cg, kTolGates, gg, &why)) return why = "g vs CPU: " + why, false;
                 if (!close_f64(got_b, rb, sb, 0, kTolGates, &why)) return why = "beta " + why, false;
                 if (!close_f64(got_g, rg, sg, 0, kTolGates, &why)) return why = "g " + why, false;
                 return true;
               });
}

// ---------------------------------------------------------------------------------------------------------------
void test_conv(Env &env, GatedDeltaOps &gops, int64_t C, int32_t W, int64_t x_pad, int32_t chunk_rows) {
  const Act act = gops.act();
  check_case(env,
             fmt("gdn causal_conv1d_silu[%s] C %lld W %d rows/thread %s%s", cuda::act_name(act), (long long)C, W,
                 chunk_rows ? std::to_string(chunk_rows).c_str() : "auto", x_pad ? " x in wider rows" : ""),
             [&](std::string &why) {
               // Lengths below the history (0, 1, 2) shift the state in place or keep it; 64, 65, 130 span chunks;
               // slots out of order with gaps (1 and 10 unused); a fresh sequence with no rows clears its slot.
               const std::vector<Seq> seqs = {{1, 5, false}, {3, 0, true},  {64, 7, false}, {2, 2, false},
                                              {0, 8, true},  {65, 3, true}, {130, 6, false}, {0, 4, false},
                                              {1, 9, true}};
               const GdnBatch b(seqs);
               Slots st(11, (W - 1) * C, seqs);
               const int64_t T = b.rows(), ld = C + x_pad;
               const auto xs = rand_act(size_t(T * ld), act, -2, 2), w = rand_act(size_t(C * W), Act::F32);
               std::vector<float> x(size_t(T * C));  // the CPU op's contiguous rows
               for (int64_t t = 0; t < T; ++t) std::copy_n(xs.begin() + t * ld, C, x.begin() + t * C);

               Dev dx = upload_act(xs, act), out = poisoned(size_t(T * C), act);
               DeviceBuffer dw = upload_raw(w), dst = upload_raw(st.v);
               gops.causal_conv1d_silu(env.stream.get(), dx.ptr(), b.dev(), T, C, W, dw.ptr(), dst.ptr(), st.stride,
                                       out.ptr(), x_pad ? ld : 0, chunk_rows);
               env.stream.synchronize();

               std::vector<float> cpu_out(size_t(T * C)), cpu_st = st.v;
               cpu::causal_conv1d_silu(env.pool, x.data(), b.host(), C, W, w.data(), cpu_st.data(), st.stride,
                                       cpu_out.data());
               std::vector<double> ref, scale;
               gdn_ref::conv(xs, ld, b.start, b.slot, C, W, w, st.ref, ref, scale);

               bool guard = false;
               const auto got = download(out, &guard);
               if (!close(got, cpu_out, tol_for(act), guard, &why)) return why = "vs CPU: " + why, false;
               if (!close_f64(got, ref, scale, kTolConv, out_rel(act), &why)) return false;
               const auto got_st = download_f32(dst, st.v.size());
               if (!slots_match(got_st, st, st.v, b.slot, [&](int32_t s, int64_t i) { return cpu_st[size_t(s * st.stride + i)]; },
                                std::max<int64_t>(1, st.floats), 0, "state vs CPU", &why))
                 return false;
               return slots_match(got_st, st, st.v, b.slot, [&](int32_t s, int64_t i) { return st.ref[size_t(s)][size_t(i)]; },
                                  std::max<int64_t>(1, st.floats), 0, "state vs float64", &why);
             });
}

// ---------------------------------------------------------------------------------------------------------------
void test_rule(Env &env, GatedDeltaOps &gops, const GdnGeometry &geo) {
  const Act act = gops.act();
  check_case(env, fmt("gdn gated_delta_rule[%s] %s", cuda::act_name(act), geo_name(geo).c_str()), [&](std::string &why) {
    const std::vector<Seq> seqs = {{65, 4, true}, {1, 0, false}, {130, 2, false}, {3, 6, true}, {0, 8, true},
                                   {64, 1, false}, {2, 7, false}, {1, 3, true}, {0, 9, false}};  // slot 5 unused
    const GdnBatch b(seqs);
    const int32_t T = b.rows();
    const int64_t n_out = int64_t(T) * geo.n_v_heads * geo.v_dim;
    const RuleInputs in = rule_inputs(T, geo, act);
    Slots st(10, geo.state_floats(), seqs);

    Dev dqkv = upload_act(in.qkv, act), out = poisoned(size_t(n_out), act);
    DeviceBuffer dg = upload_raw(in.g), dbeta = upload_raw(in.beta), dst = upload_raw(st.v);
    gops.gated_delta_rule(env.stream.get(), dqkv.ptr(), dg.ptr(), dbeta.ptr(), b.dev(), geo, dst.ptr(), st.stride,
                          out.ptr());
    env.stream.synchronize();

    std::vector<float> cpu_out(static_cast<size_t>(n_out)), cpu_st = st.v;
    cpu::gated_delta_rule(env.pool, in.qkv.data(), in.g.data(), in.beta.data(), b.host(), geo, cpu_st.data(),
                          st.stride, cpu_out.data(), cpu::DeltaRulePath::Recurrent);
    std::vector<double> ref, scale;
    gdn_ref::delta_rule(in.qkv, in.g, in.beta, b.start, b.slot, geo, st.ref, ref, scale);

    bool guard = false;
    const auto got = download(out, &guard);
    if (!close(got, cpu_out, tol_for(act), guard, &why)) return why = "vs CPU: " + why, false;
    if (!close_f64(got, ref, scale, kTolRule, act == Act::F32 ? 0 : out_rel(act), &why)) return false;
    const auto got_st = download_f32(dst, st.v.size());
    const int64_t head = int64_t(geo.k_dim) * geo.v_dim;
    if (!slots_match(got_st, st, st.v, b.slot, [&](int32_t s, int64_t i) { return cpu_st[size_t(s * st.stride + i)]; },
                     head, kTolRule, "state vs CPU", &why))
      return false;
    return slots_match(got_st, st, st.v, b.slot, [&](int32_t s, int64_t i) { return st.ref[size_t(s)][size_t(i)]; },
                       head, kTolRule, "state vs float64", &why);
  });
}

// ---------------------------------------------------------------------------------------------------------------
void test_rmsnorm(Env &env, GatedDeltaOps &gops) {
  const Act act = gops.act();
  for (int64_t dim : {8, 13, 128})
    for (int variant = 0; variant < 3; ++variant) {  // 0: out apart, 1: in place, 2: z inside wider rows
      const int64_t T = 5, heads = 6, rows = T * heads;  // T rows of Hv heads
      check_case(env,
                 fmt("gdn gated_rmsnorm[%s] rows %lld dim %lld%s", cuda::act_name(act), (long long)rows, (long long)dim,
                     variant == 1 ? " in place" : variant == 2 ? " z in wider rows" : ""),
                 [&](std::string &why) {
                   const float eps = 1e-6f;
                   const int64_t z_ld = variant == 2 ? heads * dim + 11 : heads * dim;
                   const auto x = rand_act(size_t(rows * dim), act, -3, 3), w = rand_act(size_t(dim), Act::F32, 0.2, 2);
                   const auto zs = rand_act(size_t(T * z_ld), act, -6, 6);
                   std::vector<float> z(x.size());
                   for (int64_t t = 0; t < T; ++t) std::copy_n(zs.begin() + t * z_ld, heads * dim, z.begin() + t * heads * dim);
                   Dev dx = upload_act(x, act, 64), dz = upload_act(zs, act), out = poisoned(x.size(), act);
                   DeviceBuffer dw = upload_raw(w);
                   const CUdeviceptr o = variant == 1 ? dx.ptr() : out.ptr();
                   gops.gated_rmsnorm(env.stream.get(), dx.ptr(), dz.ptr(), rows, dim, dw.ptr(), eps, o,
                                      variant == 2 ? z_ld : 0, variant == 2 ? int32_t(heads) : 1);
                   env.stream.synchronize();
                   std::vector<float> cpu_out(x.size());
                   cpu::gated_rmsnorm(env.pool, x.data(), z.data(), rows, dim, w.data(), eps, cpu_out.data());
                   std::vector<double> ref, scale(x.size(), 0);
                   gdn_ref::gated_rmsnorm(x.data(), z.data(), rows, dim, w.data(), eps, ref);
                   bool guard = false;
                   const auto got = download(variant == 1 ? dx : out, &guard);
                   if (!close(got, cpu_out, tol_for(act), guard, &why)) return why = "vs CPU: " + why, false;
                   return close_f64(got, ref, scale, 0, kTolNorm + (act == Act::F32 ? 0 : out_rel(act)), &why);
                 });
    }
}

// ---------------------------------------------------------------------------------------------------------------
// State carried across calls through conv and rule together (the layer's pipeline): each sequence fed in pieces
// over five calls (a prefill in two chunks, then decodes; some sequences absent from some calls) gives what one
// call over its whole rows gives (the same arithmetic per row: equal to fp32 rounding at most), and that call
// matches the CPU pipeline (its delta rule fed the GPU's conv output, so bf16 compares like with like).
void test_carried(Env &env, GatedDeltaOps &gops, const GdnGeometry &geo, int32_t W) {
  const Act act = gops.act();
  check_case(env, fmt("gdn conv + rule over 5 calls[%s] %s W %d", cuda::act_name(act), geo_name(geo).c_str(), W),
             [&](std::string &why) {
    using Plan = gdn_ref::CarriedPlan;
    const std::vector<Plan> &plans = gdn_ref::carried_plans();
    const int64_t C = geo.qkv_dim(), hv = geo.n_v_heads, row_out = hv * int64_t(geo.v_dim);
    std::vector<Seq> whole;
    for (const Plan &p : plans) whole.push_back({std::accumulate(p.parts.begin(), p.parts.end(), 0), p.slot, p.fresh});
    const GdnBatch wb(whole);
    const auto x = rand_act(size_t(wb.rows() * C), act, -2, 2), w = rand_act(size_t(C * W), Act::F32);
    const RuleInputs gates = rule_inputs(wb.rows(), geo, act);
    Slots conv0(8, (W - 1) * C, whole), rec0(8, geo.state_floats(), whole);
    DeviceBuffer dw = upload_raw(w);

    // One call of the pipeline on the device: returns its qkv (the conv's output) and out, leaves the states in dc, dr.
    auto run = [&](const GdnBatch &b, const float *xx, const float *gg, const float *bb, DeviceBuffer &dc,
                   DeviceBuffer &dr, std::vector<float> *qkv_out, std::vector<float> &out) {
      const int64_t T = b.rows();
      Dev dx = upload_act(std::vector<float>(xx, xx + T * C), act), qkv = poisoned(size_t(T * C), act);
      Dev o = poisoned(size_t(T * row_out), act);
      DeviceBuffer dg = upload_raw(std::vector<float>(gg, gg + T * hv)), db = upload_raw(std::vector<float>(bb, bb + T * hv));
      gops.causal_conv1d_silu(env.stream.get(), dx.ptr(), b.dev(), T, C, W, dw.ptr(), dc.ptr(), conv0.stride, qkv.ptr());
      gops.gated_delta_rule(env.stream.get(), qkv.ptr(), dg.ptr(), db.ptr(), b.dev(), geo, dr.ptr(), rec0.stride, o.ptr());
      env.stream.synchronize();
      bool guard = false;
      out = download(o, &guard);
      if (qkv_out) *qkv_out = download(qkv);
      return guard;
    };

    DeviceBuffer one_c = upload_raw(conv0.v), one_r = upload_raw(rec0.v);
    std::vector<float> qkv_one, out_one;
    if (!run(wb, x.data(), gates.g.data(), gates.beta.data(), one_c, one_r, &qkv_one, out_one))
      return why = "one call wrote past its output", false;

    DeviceBuffer split_c = upload_raw(conv0.v), split_r = upload_raw(rec0.v);
    std::vector<float> out_split(out_one.size(), NAN);
    std::vector<int32_t> done(plans.size(), 0);
    for (size_t k = 0; k < plans[0].parts.size(); ++k) {
      std::vector<Seq> seqs;
      std::vector<size_t> who;
      for (size_t s = 0; s < plans.size(); ++s)
        if (plans[s].parts[k]) seqs.push_back({plans[s].parts[k], plans[s].slot, plans[s].fresh && !done[s]}), who.push_back(s);
      const GdnBatch b(seqs);
      std::vector<float> xx, gg, bb, out;
      for (size_t i = 0; i < who.size(); ++i) {  // this call's rows of each sequence
        const int64_t r0 = wb.start[who[i]] + done[who[i]], r1 = r0 + seqs[i].len;
        xx.insert(xx.end(), x.begin() + r0 * C, x.begin() + r1 * C);
        gg.insert(gg.end(), gates.g.begin() + r0 * hv, gates.g.begin() + r1 * hv);
        bb.insert(bb.end(), gates.beta.begin() + r0 * hv, gates.beta.begin() + r1 * hv);
      }
      if (!run(b, xx.data(), gg.data(), bb.data(), split_c, split_r, nullptr, out))
        return why = fmt("call %zu wrote past its output", k + 1), false;
      for (size_t i = 0; i < who.size(); ++i) {  // its outputs back to the one-call layout
        const int64_t r0 = wb.start[who[i]] + done[who[i]];
        std::copy_n(out.begin() + b.start[i] * row_out, seqs[i].len * row_out, out_split.begin() + r0 * row_out);
        done[who[i]] += seqs[i].len;
      }
    }
    if (!close(out_split, out_one, 1e-6, true, &why)) return why = "5 calls vs one call: " + why, false;
    const auto sc = download_f32(split_c, conv0.v.size()), oc = download_f32(one_c, conv0.v.size());
    const auto sr = download_f32(split_r, rec0.v.size()), orr = download_f32(one_r, rec0.v.size());
    const int64_t head = int64_t(geo.k_dim) * geo.v_dim, conv_head = std::max<int64_t>(1, conv0.floats);
    if (!slots_match(sc, conv0, conv0.v, wb.slot, [&](int32_t s, int64_t i) { return oc[size_t(s * conv0.stride + i)]; },
                     conv_head, 0, "conv state, 5 calls vs one call", &why) ||
        !slots_match(sr, rec0, rec0.v, wb.slot, [&](int32_t s, int64_t i) { return orr[size_t(s * rec0.stride + i)]; },
                     head, 1e-6, "recurrent state, 5 calls vs one call", &why))
      return false;

    // The one call against the CPU pipeline.
    std::vector<float> cpu_qkv(qkv_one.size()), cpu_out(out_one.size()), cpu_c = conv0.v, cpu_r = rec0.v;
    cpu::causal_conv1d_silu(env.pool, x.data(), wb.host(), C, W, w.data(), cpu_c.data(), conv0.stride, cpu_qkv.data());
    if (!close(qkv_one, cpu_qkv, tol_for(act), true, &why)) return why = "conv vs CPU: " + why, false;
    cpu::gated_delta_rule(env.pool, qkv_one.data(), gates.g.data(), gates.beta.data(), wb.host(), geo, cpu_r.data(),
                          rec0.stride, cpu_out.data(), cpu::DeltaRulePath::Recurrent);
    if (!close(out_one, cpu_out, tol_for(act), true, &why)) return why = "rule vs CPU: " + why, false;
    return slots_match(oc, conv0, conv0.v, wb.slot, [&](int32_t s, int64_t i) { return cpu_c[size_t(s * conv0.stride + i)]; },
                       conv_head, 0, "conv state vs CPU", &why) &&
           slots_match(orr, rec0, rec0.v, wb.slot, [&](int32_t s, int64_t i) { return cpu_r[size_t(s * rec0.stride + i)]; },
                       head, kTolRule, "recurrent state vs CPU", &why);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// A decode step of the layer's ops (gates, conv, rule, norm) captured in a CUDA graph as the engine captures its
// steps (nothing inside may allocate or wait), replayed after the metadata buffers are given new slots and first
// positions: each replay equals the same ops run eagerly on that metadata.
void test_graph(Env &env, GatedDeltaOps &gops) {
  const Act act = gops.act();
  check_case(env, fmt("gdn ops in a CUDA graph[%s]", cuda::act_name(act)), [&](std::string &why) {
    const GdnGeometry geo{2, 4, 32, 32};
    const int32_t W = 4, n = 4, n_slots = 7;
    const int64_t C = geo.qkv_dim(), hv = geo.n_v_heads, dv = geo.v_dim;
    const std::vector<Seq> first = {{1, 0, true}, {1, 5, true}, {1, 2, false}, {1, 6, false}};
    GdnBatch b(first);
    const auto x = rand_act(size_t(n * C), act, -2, 2), ba = rand_act(size_t(n * 2 * hv), act, -3, 3);
    const auto z = rand_act(size_t(n * hv * dv), act, -3, 3), w = rand_act(size_t(C * W), Act::F32);
    const auto A_log = rand_act(size_t(hv), Act::F32, -2, 2), dt_bias = rand_act(size_t(hv), Act::F32, -1, 1);
    const auto nw = rand_act(size_t(dv), Act::F32, 0.5, 1.5);
    const Slots conv0(n_slots, (W - 1) * C, {}), rec0(n_slots, geo.state_floats(), {});
    Dev dx = upload_act(x, act), dba = upload_act(ba, act), dz = upload_act(z, act);
    Dev qkv = poisoned(size_t(n * C), act), o = poisoned(size_t(n * hv * dv), act);
    DeviceBuffer dw = upload_raw(w), dA = upload_raw(A_log), ddt = upload_raw(dt_bias), dnw = upload_raw(nw);
    DeviceBuffer beta(size_t(n * hv) * 4), g(size_t(n * hv) * 4);
    DeviceBuffer dc = upload_raw(conv0.v), dr = upload_raw(rec0.v);
    const CUdeviceptr a_ptr = dba.ptr() + CUdeviceptr(hv * int64_t(cuda::act_size(act)));
    auto step = [&](const GdnBatch &bb) {
      const cuda::CUstream s = env.stream.get();
      gops.gdn_gates(s, dba.ptr(), a_ptr, n, int32_t(hv), dA.ptr(), ddt.ptr(), beta.ptr(), g.ptr(), 2 * hv);
      gops.causal_conv1d_silu(s, dx.ptr(), bb.dev(), n, C, W, dw.ptr(), dc.ptr(), conv0.stride, qkv.ptr());
      gops.gated_delta_rule(s, qkv.ptr(), g.ptr(), beta.ptr(), bb.dev(), geo, dr.ptr(), rec0.stride, o.ptr());
      gops.gated_rmsnorm(s, o.ptr(), dz.ptr(), n * hv, dv, dnw.ptr(), 1e-6f, o.ptr());
    };
    CapturedGraph graph(env.stream.get(), [&] { step(b); });
    const std::vector<std::vector<Seq>> steps = {first, {{1, 3, true}, {1, 0, false}, {1, 1, false}, {1, 5, false}}};
    for (size_t k = 0; k < steps.size(); ++k) {
      const GdnBatch meta(steps[k]);  // the same values, eagerly, on this metadata's own buffers
      // From the same states both ways: reset them, replay the graph on b's buffers (given meta's values), keep
      // its results; reset again, run eagerly.
      std::vector<float> got[2][3];
      for (int eager = 0; eager < 2; ++eager) {
        dc.upload(env.stream.get(), conv0.v.data(), conv0.v.size() * 4);
        dr.upload(env.stream.get(), rec0.v.data(), rec0.v.size() * 4);
        if (eager) {
          step(meta);
        } else {
          b.d_slot.upload(env.stream.get(), meta.slot.data(), meta.slot.size() * 4);
          b.d_pos0.upload(env.stream.get(), meta.pos0.data(), meta.pos0.size() * 4);
          graph.launch(env.stream.get());
        }
        env.stream.synchronize();
        got[eager][0] = download(o), got[eager][1] = download_f32(dc, conv0.v.size());
        got[eager][2] = download_f32(dr, rec0.v.size());
      }
      for (int i = 0; i < 3; ++i)
        if (std::memcmp(got[0][i].data(), got[1][i].data(), got[0][i].size() * 4))
          return why = fmt("replay %zu: %s differs from the eager run", k + 1,
                           i == 0 ? "output" : i == 1 ? "conv state" : "recurrent state"),
                 false;
      for (float v : got[0][0])
        if (std::isnan(v)) return why = fmt("replay %zu: output NaN", k + 1), false;
    }
    return true;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Padding sequences (slot -1: a captured decode step's rows past its batch, as CudaDecoder stages them, fresh or
// not) among real ones, through the layer's ops (gates, conv, rule, norm): the real sequences' outputs and both
// state arrays are bit for bit those of the same batch without the pads (the pads touch no slot), and the pads'
// rows are written (from zero states: no NaN).
void test_padding(Env &env, GatedDeltaOps &gops) {
  const Act act = gops.act();
  check_case(env, fmt("gdn padding sequences (slot -1)[%s]", cuda::act_name(act)), [&](std::string &why) {
    const GdnGeometry geo{2, 4, 32, 40};  // Dv 40: two column blocks of the rule
    const int32_t W = 4, n_slots = 6;
    const int64_t C = geo.qkv_dim(), hv = geo.n_v_heads, dv = geo.v_dim, row_out = hv * dv;
    const std::vector<Seq> padded = {{1, 2, false}, {1, -1, true}, {3, 4, true},
                                     {1, 0, false}, {1, -1, false}, {1, -1, true}};
    std::vector<Seq> real;
    std::vector<int64_t> real_rows;  // the padded batch's row of each real row, in order
    int64_t r = 0;
    for (const Seq &q : padded) {
      if (q.slot >= 0) {
        real.push_back(q);
        for (int32_t i = 0; i < q.len; ++i) real_rows.push_back(r + i);
      }
      r += q.len;
    }
    const GdnBatch pb(padded), rb(real);
    const int64_t T = pb.rows();
    const auto x = rand_act(size_t(T * C), act, -2, 2), ba = rand_act(size_t(T * 2 * hv), act, -3, 3);
    const auto z = rand_act(size_t(T * row_out), act, -3, 3), w = rand_act(size_t(C * W), Act::F32);
    const auto A_log = rand_act(size_t(hv), Act::F32, -2, 2), dt_bias = rand_act(size_t(hv), Act::F32, -1, 1);
    const auto nw = rand_act(size_t(dv), Act::F32, 0.5, 1.5);
    const Slots conv0(n_slots, (W - 1) * C, real), rec0(n_slots, geo.state_floats(), real);
    DeviceBuffer dw = upload_raw(w), dA = upload_raw(A_log), ddt = upload_raw(dt_bias), dnw = upload_raw(nw);
    // The layer's ops over rows (x, b|a, z) picked from the padded batch's; returns the output, leaves the states.
    auto run = [&](const GdnBatch &b, const std::vector<int64_t> &rows, DeviceBuffer &dc, DeviceBuffer &dr,
                   std::vector<float> &out) {
      const int64_t n = int64_t(rows.size());
      std::vector<float> xs, bas, zs;
      for (int64_t t : rows) {
        xs.insert(xs.end(), x.begin() + t * C, x.begin() + (t + 1) * C);
        bas.insert(bas.end(), ba.begin() + t * 2 * hv, ba.begin() + (t + 1) * 2 * hv);
        zs.insert(zs.end(), z.begin() + t * row_out, z.begin() + (t + 1) * row_out);
      }
      Dev dx = upload_act(xs, act), dba = upload_act(bas, act), dz = upload_act(zs, act);
      Dev qkv = poisoned(size_t(n * C), act), o = poisoned(size_t(n * row_out), act);
      DeviceBuffer beta(size_t(n * hv) * 4), g(size_t(n * hv) * 4);
      const cuda::CUstream s = env.stream.get();
      const CUdeviceptr a_ptr = dba.ptr() + CUdeviceptr(hv * int64_t(cuda::act_size(act)));
      gops.gdn_gates(s, dba.ptr(), a_ptr, n, int32_t(hv), dA.ptr(), ddt.ptr(), beta.ptr(), g.ptr(), 2 * hv);
      gops.causal_conv1d_silu(s, dx.ptr(), b.dev(), n, C, W, dw.ptr(), dc.ptr(), conv0.stride, qkv.ptr());
      gops.gated_delta_rule(s, qkv.ptr(), g.ptr(), beta.ptr(), b.dev(), geo, dr.ptr(), rec0.stride, o.ptr());
      gops.gated_rmsnorm(s, o.ptr(), dz.ptr(), n * hv, dv, dnw.ptr(), 1e-6f, o.ptr());
      env.stream.synchronize();
      bool guard = false;
      out = download(o, &guard);
      return guard;
    };
    std::vector<int64_t> all(static_cast<size_t>(T));
    std::iota(all.begin(), all.end(), 0);
    DeviceBuffer pc = upload_raw(conv0.v), pr = upload_raw(rec0.v), rc = upload_raw(conv0.v), rr = upload_raw(rec0.v);
    std::vector<float> out_padded, out_real;
    if (!run(pb, all, pc, pr, out_padded) || !run(rb, real_rows, rc, rr, out_real))
      return why = "wrote past its output", false;
    for (float v : out_padded)
      if (std::isnan(v)) return why = "a row of the padded batch is NaN (not written, or a state read)", false;
    for (size_t i = 0; i < real_rows.size(); ++i)
      if (std::memcmp(&out_padded[size_t(real_rows[i] * row_out)], &out_real[i * size_t(row_out)], size_t(row_out) * 4))
        return why = fmt("real row %zu differs from the batch without padding", i), false;
    // (bit for bit: memcmp, which also holds for any NaN a slot kept)
    const auto same = [](const std::vector<float> &a, const std::vector<float> &b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    };
    if (!same(download_f32(pc, conv0.v.size()), download_f32(rc, conv0.v.size())))
      return why = "conv states differ from the batch without padding", false;
    if (!same(download_f32(pr, rec0.v.size()), download_f32(rr, rec0.v.size())))
      return why = "recurrent states differ from the batch without padding", false;
    return true;
  });
}

}  // namespace

void test_gated_delta(Env &env, cuda::Ops &ops) {
  GatedDeltaOps gops(env.ctx, ops.act());
  test_gates(env, gops);
  const GdnGeometry ragged{2, 6, 16, 8}, wide_v{1, 3, 8, 24}, square{2, 2, 32, 32}, odd_v{1, 2, 128, 40};
  const GdnGeometry qwen27b{16, 48, 128, 128};  // Qwen3.5-27B's linear-attention layers
  for (int32_t chunk : {0, 1, 2, 3, 64}) {
    for (int32_t W : {4, 2, 1}) test_conv(env, gops, ragged.qkv_dim(), W, 0, chunk);
    test_conv(env, gops, 300, 3, 37, chunk);  // C over two blocks of threads, not a multiple of them; x strided
  }
  if (!g_small) test_conv(env, gops, qwen27b.qkv_dim(), 4, 0, 0);
  for (const GdnGeometry &geo : {ragged, wide_v, square, odd_v}) test_rule(env, gops, geo);
  if (!g_small) test_rule(env, gops, qwen27b);
  test_rmsnorm(env, gops);
  test_carried(env, gops, ragged, 4);
  if (!g_small) test_carried(env, gops, qwen27b, 4);
  test_graph(env, gops);
  test_padding(env, gops);
}

}  // namespace cuda_tests
