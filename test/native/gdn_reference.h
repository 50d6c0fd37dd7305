// The float64 reference of the Gated DeltaNet ops that both the CPU op test (test_cpu_gdn.cpp) and the CUDA op test
// (cuda_ops/gated_delta.cpp) compare against, written straight from the definitions: transformers'
// causal_conv1d_update, the layer's gates, Qwen3_5RMSNormGated, and the delta rule with the semantics of
// torch_recurrent_gated_delta_rule / torch_chunk_gated_delta_rule (one recurrence; the chunked form computes it in
// chunks), written here in the recurrent form.
//
// A batch is given as the tests hold it: sequence s is rows [start[s], start[s + 1]) and carries its state in
// states[slot[s]] (one float64 vector per slot). Each reference that has a state updates the states of the
// sequences it runs. Inputs may be float or double (a float is widened exactly); every sum is in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/gdn_geometry.h"

namespace gdn_ref {

// out = silu(Σ_j w[c, j] · in[t - (W-1) + j, c]) over [history (W-1, C); rows]; history ← the last W-1 of that.
// x rows ld apart; w (C, W). scale[o] = Σ_j |terms|, the magnitude the sum rounds at (silu' lies in (-0.1, 1.1):
// the sum's rounding passes through at most 1.1 times).
template <class T>
inline void conv(const std::vector<T> &x, int64_t ld, const std::vector<int32_t> &start,
                 const std::vector<int32_t> &slot, int64_t C, int32_t W, const std::vector<float> &w,
                 std::vector<std::vector<double>> &states, std::vector<double> &out, std::vector<double> &scale) {
  const int32_t hist = W - 1;
  out.assign(size_t(start.back() * C), 0), scale.assign(out.size(), 0);
  for (size_t s = 0; s < slot.size(); ++s) {
    std::vector<double> &h = states[size_t(slot[s])];
    std::vector<double> all(h);  // (hist + n, C)
    for (int32_t t = start[s]; t < start[s + 1]; ++t) all.insert(all.end(), x.begin() + t * ld, x.begin() + t * ld + C);
    const int32_t n = start[s + 1] - start[s];
    for (int32_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0, mag = 0;
        for (int32_t j = 0; j < W; ++j) {
          const double p = w[size_t(c * W + j)] * all[size_t((t + j) * C + c)];
          acc += p, mag += std::fabs(p);
        }
        const size_t o = size_t((start[s] + t) * C + c);
        out[o] = acc / (1 + std::exp(-acc));
        scale[o] = mag;
      }
    h.assign(all.end() - hist * C, all.end());
  }
}

// beta = sigmoid(b), g = -exp(A_log) · softplus(a + dt_bias), for b, a (T, Hv). a + dt_bias is summed in fp32 as in
// transformers (both fp32 tensors) before softplus: for x near -30, softplus(x) ≈ exp(x) turns that one rounding (up
// to 1e-6 relative) into the same relative error in g. softplus is taken exactly (no threshold).
inline void gates(const float *b, const float *a, int64_t T, int32_t hv, const float *A_log, const float *dt_bias,
                  std::vector<double> &beta, std::vector<double> &g) {
  beta.assign(size_t(T * hv), 0), g.assign(beta.size(), 0);
  for (int64_t i = 0; i < T * hv; ++i) {
    const int64_t h = i % hv;
    const double x = double(a[size_t(i)] + dt_bias[size_t(h)]);
    beta[size_t(i)] = 1 / (1 + std::exp(-double(b[size_t(i)])));
    g[size_t(i)] = -std::exp(double(A_log[size_t(h)])) * std::log1p(std::exp(x));
  }
}

// out = w ⊙ rmsnorm(x) ⊙ silu(z) per row of dim values (x, z: rows × dim; w: dim).
inline void gated_rmsnorm(const float *x, const float *z, int64_t rows, int64_t dim, const float *w, float eps,
                          std::vector<double> &out) {
  out.assign(size_t(rows * dim), 0);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[size_t(r * dim + i)]) * x[size_t(r * dim + i)];
    const double inv = 1 / std::sqrt(ss / double(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const size_t e = size_t(r * dim + i);
      const double zz = z[e];
      out[e] = w[size_t(i)] * (x[e] * inv) * (zz / (1 + std::exp(-zz)));
    }
  }
}

// v ← v / (sqrt(Σ v² + 1e-6) · extra): transformers' l2norm (eps inside the root), with q's 1/sqrt(Dk) as extra.
inline void l2norm(std::vector<double> &v, double extra = 1) {
  double ss = 0;
  for (double e : v) ss += e * e;
  for (double &e : v) e /= std::sqrt(ss + 1e-6) * extra;
}

// The recurrence exactly as transformers' torch_recurrent_gated_delta_rule writes it, per value head:
//   S ← S · exp(g);  kv_mem = Sᵀk;  delta = (v - kv_mem) · beta;  S ← S + k ⊗ delta;  o = Sᵀq
// with q, k l2-normalised (eps 1e-6 inside the root) and q scaled by 1/sqrt(Dk), key head h / (Hv/Hk). qkv rows
// (T, qkv_dim): q heads, k heads, v heads; g, beta (T, Hv); states (Hv, Dk, Dv); out (T, Hv, Dv).
// scale[o] = Σ_r |q_r S_rc|, the magnitude the output is summed from.
template <class T>
inline void delta_rule(const std::vector<T> &qkv, const std::vector<float> &g, const std::vector<float> &beta,
                       const std::vector<int32_t> &start, const std::vector<int32_t> &slot, const vt::GdnGeometry &geo,
                       std::vector<std::vector<double>> &states, std::vector<double> &out, std::vector<double> &scale) {
  const int32_t dk = geo.k_dim, dv = geo.v_dim, hv = geo.n_v_heads;
  const int64_t C = geo.qkv_dim();
  out.assign(size_t(start.back()) * hv * dv, 0), scale.assign(out.size(), 0);
  std::vector<double> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk)), kv(static_cast<size_t>(dv));
  for (size_t s = 0; s < slot.size(); ++s)
    for (int32_t h = 0; h < hv; ++h) {
      double *S = states[size_t(slot[s])].data() + int64_t(h) * dk * dv;
      const int32_t kh = h / (hv / geo.n_k_heads);
      for (int32_t t = start[s]; t < start[s + 1]; ++t) {
        const T *row = &qkv[size_t(t * C)];
        for (int32_t i = 0; i < dk; ++i) q[size_t(i)] = row[kh * dk + i], k[size_t(i)] = row[(geo.n_k_heads + kh) * dk + i];
        l2norm(q, std::sqrt(double(dk)));
        l2norm(k);
        const T *v = row + 2 * geo.n_k_heads * dk + h * dv;
        const double decay = std::exp(double(g[size_t(t * hv + h)])), bt = beta[size_t(t * hv + h)];
        for (int64_t i = 0; i < int64_t(dk) * dv; ++i) S[i] *= decay;
        std::fill(kv.begin(), kv.end(), 0.0);
        for (int32_t r = 0; r < dk; ++r)
          for (int32_t c = 0; c < dv; ++c) kv[size_t(c)] += S[r * dv + c] * k[size_t(r)];
        for (int32_t r = 0; r < dk; ++r)
          for (int32_t c = 0; c < dv; ++c) S[r * dv + c] += k[size_t(r)] * (v[c] - kv[size_t(c)]) * bt;
        for (int32_t c = 0; c < dv; ++c) {
          double o = 0, mag = 0;
          for (int32_t r = 0; r < dk; ++r) o += S[r * dv + c] * q[size_t(r)], mag += std::fabs(S[r * dv + c] * q[size_t(r)]);
          out[size_t((int64_t(t) * hv + h) * dv + c)] = o;
          scale[size_t((int64_t(t) * hv + h) * dv + c)] = mag;
        }
      }
    }
}

// The carried-state test's plan, shared by the CPU and CUDA op tests: each sequence fed in pieces over five calls
// (a prefill in two chunks, then decodes; some sequences absent from some calls). parts[k]: its rows in call k.
struct CarriedPlan {
  int32_t slot;
  bool fresh;
  std::vector<int32_t> parts;
};
inline const std::vector<CarriedPlan> &carried_plans() {
  static const std::vector<CarriedPlan> plans = {
      {6, true, {70, 60, 1, 1, 1}},   // two prefill pieces (the second not a whole chunk), three decodes
      {2, false, {65, 0, 1, 1, 1}},   // continues an earlier sequence; sits out the second call
      {0, true, {1, 1, 1, 2, 1}},     // one row at a time from its first (the conv history still filling)
      {4, true, {0, 130, 0, 1, 0}},   // starts in the second call
      {3, false, {0, 0, 3, 0, 64}},   // short then long pieces of a continuing sequence
  };
  return plans;
}

}  // namespace gdn_ref
