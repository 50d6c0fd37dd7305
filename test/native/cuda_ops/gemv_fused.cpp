// CUDA op checks: the decode step's fused GEMVs (Ops::gemv_residual, gemv_norm, gemv_swiglu_norm, gemv_norm_head).
// gemv_residual claims "bitwise the residual that gemv + add_rmsnorm_res32 leave", held to that with tolerance 0,
// and partial sums of squares that add up to each new row's (against the CPU's double sums), and xw = the new
// rows times the next norm's weight rounded to the activation type (bitwise, against the CPU's product). The norm
// forms claim inv * (xw · w) (+ bias; silu(gate) * up): held against the CPU's double sums of the same within the
// op tolerance, and against rmsnorm_res32 + gemv / gemv_swiglu, which round the normed input after the scale
// instead of before it, within the same tolerance (4x for the SwiGLU's, which magnifies it; the case says why). And the GEMVs' *_early kernels
// (the default under PDL; CudaOpsTuning::early_loads off: the plain ones): the same bits as the plain ones, in a chain where
// each kernel reads what the one before wrote while PDL lets it start early.
#include <cstdlib>

#include "../cuda_check.h"

namespace cuda_tests {

std::vector<uint16_t> rand_bf16_weights(size_t n);  // gemv.cpp

namespace {

// What the fused norm's products compute, in double: rows (M, rows) of inv[m] * (xw[m] · w[r]), xw the rows times
// the norm weight as rounded for the kernel (cpu_xw) and inv[m] = 1 / sqrt(mean of res[m]² + eps) from the
// unrounded residual rows. terms: inv[m] * the l2 norm of the terms xw[m][k] * w[r][k] instead, the size of what the
// dot product adds up (and may cancel): rounding its input at another point moves it by a random walk over the
// terms, relative to that.
std::vector<double> cpu_scaled_product(const std::vector<float> &res, const std::vector<float> &xw, int64_t M,
                                       int64_t K, const std::vector<uint16_t> &w, int64_t rows, float eps,
                                       bool terms = false) {
  std::vector<double> out(size_t(M * rows));
  for (int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (int64_t k = 0; k < K; ++k) ss += double(res[size_t(m * K + k)]) * res[size_t(m * K + k)];
    const double inv = 1 / std::sqrt(ss / double(K) + eps);
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = double(xw[size_t(m * K + k)]) * bf16_to_f32(w[size_t(r * K + k)]);
        dot += terms ? t * t : t;
      }
      out[size_t(m * rows + r)] = inv * (terms ? std::sqrt(dot) : dot);
    }
  }
  return out;
}

}  // namespace

// x * w per row (the next norm's weight), rounded to the activation type: gemv_residual's xw, computed here.
std::vector<float> cpu_xw(const std::vector<float> &x, int64_t M, int64_t K, const std::vector<float> &w, Act act) {
  std::vector<float> out(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float v = x[size_t(m * K + k)] * w[size_t(k)];
      out[size_t(m * K + k)] = act == Act::BF16 ? bf16_to_f32(to_bf16(v)) : v;
    }
  return out;
}

// Partial sums of squares as gemv_residual leaves them, computed here: (M, Ops::norm_parts(K)), part p of row m
// the sum over elements [8p, 8p + 8).
std::vector<float> cpu_ss_parts(const std::vector<float> &x, int64_t M, int64_t K) {
  const int64_t P = cuda::Ops::norm_parts(K);
  std::vector<float> out(size_t(M * P), 0.f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t p = 0; p < P; ++p) {
      double ss = 0;
      for (int64_t k = 8 * p; k < std::min(K, 8 * p + 8); ++k)
        ss += double(x[size_t(m * K + k)]) * x[size_t(m * K + k)];
      out[size_t(m * P + p)] = float(ss);
    }
  return out;
}

void test_gemv_fused(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  if (!ops.fused_gemv_available()) {
    std::printf("skip gemv_norm/gemv_residual[%s]: a kernel image without the fused-norm GEMVs\n", cuda::act_name(act));
    return;
  }
  const auto s = env.stream.get();
  const float eps = 1e-6f;
  // (M, K = hidden, N): one unit; Qwen3-0.6B's and 8B's q|k|v; M 13 = launches of 8 + 4 + 1 rows; K not a
  // multiple of 8 (the scalar path); K 4104 (a tail of chunks).
  struct Shape { int64_t M, K, N; };
  const Shape shapes[] = {{1, 64, 1},      {1, 1024, 4096}, {3, 1024, 4096}, {1, 4096, 6144}, {4, 4096, 6144},
                          {8, 1024, 257},  {13, 256, 67},   {2, 67, 13},     {1, 4104, 5}};
  for (const Shape &sh : shapes)
    for (int bias = 0; bias < 2; ++bias) {
      if (g_small && sh.K * sh.N > (1 << 22)) continue;
      const int64_t M = sh.M, K = sh.K, N = sh.N;
      check_case(env,
                 fmt("gemv_norm[%s] M %lld K %lld N %lld%s", cuda::act_name(act), (long long)M, (long long)K,
                     (long long)N, bias ? " +bias" : ""),
                 [&](std::string &why) {
                   const auto res = rand_act(size_t(M * K), Act::F32, -3, 3);
                   const auto nw = rand_act(size_t(K), Act::F32, 0.5, 1.5);
                   const auto w = rand_bf16_weights(size_t(N * K));
                   const auto b = rand_act(size_t(N), Act::F32);
                   DeviceBuffer dres = upload_raw(res), dnw = upload_raw(nw), dw = upload_raw(w), db = upload_raw(b),
                                dss = upload_raw(cpu_ss_parts(res, M, K));
                   const auto xw = cpu_xw(res, M, K, nw, act);
                   Dev dxw = upload_act(xw, act);
                   const CUdeviceptr bp = bias ? db.ptr() : 0;
                   Dev fused = poisoned(size_t(M * N), act), normed = poisoned(size_t(M * K), act, 0),
                       apart = poisoned(size_t(M * N), act);
                   ops.gemv_norm(s, dxw.ptr(), dss.ptr(), M, K, eps, dw.ptr(), N, bp, fused.ptr());
                   ops.rmsnorm_res32(s, dres.ptr(), M, K, dnw.ptr(), eps, normed.ptr());
                   ops.gemv(s, normed.ptr(), M, K, dw.ptr(), N, bp, apart.ptr());
                   bool guard = false;
                   const auto got = download(fused, &guard);
                   const auto prod = cpu_scaled_product(res, xw, M, K, w, N, eps);
                   std::vector<float> ref(size_t(M * N));
                   for (size_t i = 0; i < ref.size(); ++i) ref[i] = float(prod[i] + (bias ? b[i % size_t(N)] : 0.f));
                   const auto terms = cpu_scaled_product(res, xw, M, K, w, N, eps, true);
                   double tss = 0;
                   for (double t : terms) tss += t * t;
                   if (!close(got, ref, tol_for(act), guard, &why,
                              accumulation_floor(std::sqrt(tss / double(terms.size())), K, tol_for(act))))
                     return false;
                   // and the separate kernels' result (the input rounded at another point): each is within the op
                   // tolerance of the exact product, so the two are within twice it of each other (the triangle
                   // inequality; at once the bound missed by 1.02-1.05x in 1 of 6 bf16 runs on the H200), relative
                   // to the size of the terms where that exceeds the outputs' rms: one output (N 1) has no rms to
                   // stand for them, and its sum can cancel (seen at 1.08x the bound at K 64).
                   if (!close(got, download(apart), 2 * tol_for(act), true, &why, std::sqrt(tss / double(terms.size()))))
                     return why = "vs rmsnorm + gemv: " + why, false;
                   return true;
                 });
    }

  // gemv_swiglu_norm: (M, K = hidden, I), Qwen3-0.6B's and 8B's MLP among them.
  const Shape mlp[] = {{1, 64, 1}, {1, 1024, 3072}, {8, 1024, 3072}, {1, 4096, 12288}, {3, 4096, 12288},
                       {13, 256, 67}, {2, 67, 13}};
  for (const Shape &sh : mlp) {
    if (g_small && 2 * sh.K * sh.N > (1 << 22)) continue;
    const int64_t M = sh.M, K = sh.K, I = sh.N;
    check_case(env,
               fmt("gemv_swiglu_norm[%s] M %lld K %lld I %lld", cuda::act_name(act), (long long)M, (long long)K,
                   (long long)I),
               [&](std::string &why) {
                 const auto res = rand_act(size_t(M * K), Act::F32, -3, 3);
                 const auto nw = rand_act(size_t(K), Act::F32, 0.5, 1.5);
                 const auto w = rand_bf16_weights(size_t(2 * I * K));
                 DeviceBuffer dres = upload_raw(res), dnw = upload_raw(nw), dw = upload_raw(w),
                              dss = upload_raw(cpu_ss_parts(res, M, K));
                 const auto xw = cpu_xw(res, M, K, nw, act);
                 Dev dxw = upload_act(xw, act);
                 Dev fused = poisoned(size_t(M * I), act), normed = poisoned(size_t(M * K), act, 0),
                     apart = poisoned(size_t(M * I), act);
                 ops.gemv_swiglu_norm(s, dxw.ptr(), dss.ptr(), M, K, eps, dw.ptr(), I, fused.ptr());
                 ops.rmsnorm_res32(s, dres.ptr(), M, K, dnw.ptr(), eps, normed.ptr());
                 ops.gemv_swiglu(s, normed.ptr(), M, K, dw.ptr(), I, apart.ptr());
                 bool guard = false;
                 const auto got = download(fused, &guard);
                 const auto gu = cpu_scaled_product(res, xw, M, K, w, 2 * I, eps);
                 std::vector<float> ref(size_t(M * I));
                 for (int64_t m = 0; m < M; ++m)
                   for (int64_t i = 0; i < I; ++i) {
                     const double g = gu[size_t(m * 2 * I + i)], u = gu[size_t(m * 2 * I + I + i)];
                     ref[size_t(m * I + i)] = float(g / (1 + std::exp(-g)) * u);
                   }
                 // silu(g) * u's sensitivity to its sums' rounding, |silu'(g) u| Tg + |silu(g)| Tu (Tg, Tu: the l2
                 // norms of the gate's and up's terms), as the rms over the outputs.
                 const auto terms = cpu_scaled_product(res, xw, M, K, w, 2 * I, eps, true);
                 const double f_rms = swiglu_sensitivity_rms(gu, M, I, [&](int64_t m, int64_t j) {
                   return terms[size_t(m * 2 * I + j)];
                 });
                 if (!close(got, ref, tol_for(act), guard, &why, accumulation_floor(f_rms, K, tol_for(act)))) return false;
                 // The separate kernels round the normed input after the 1 / rms scale, these before it: the
                 // gate and up sums differ by that rounding (~2^-9 of a sum in bf16), and where the gate is near
                 // zero and |up| large silu(g) * u passes it on magnified (measured up to 2.1x the op tolerance
                 // of the output's rms, 12288 outputs): 4x the tolerance against them. One output (I 1) has no
                 // rms to stand for the terms (seen at 1.18x the bound at K 64 on the H200), so the bound is also
                 // relative to twice what that rounding moves silu(g) * u by, |silu'(g) u| Tg + |silu(g)| Tu
                 // (Tg, Tu: the root sum of squares of the gate's and up's terms) times the rounding's 2^-9
                 // (fp32: 2^-24), where that exceeds the outputs' rms (it does not for the large shapes).
                 const double rounding = act == Act::F32 ? 0x1p-24 : 0x1p-9, tol = 4 * tol_for(act);
                 if (!close(got, download(apart), tol, true, &why, 2 * rounding / tol * f_rms))
                   return why = "vs rmsnorm + gemv_swiglu: " + why, false;
                 return true;
               });
  }

  // gemv_residual: (M, K, N = hidden), o_proj's and down_proj's shapes among them; the sublayer output rounded
  // to the activation type, or kept fp32 (VT_CUDA_SUBLAYER_F32).
  const Shape proj[] = {{1, 64, 1},       {1, 2048, 1024}, {3, 3072, 1024}, {1, 4096, 4096}, {4, 12288, 4096},
                        {13, 256, 67},    {2, 67, 13},     {8, 520, 130}};
  for (const Shape &sh : proj)
    for (int round_f32 = 0; round_f32 < (act == Act::BF16 ? 2 : 1); ++round_f32)
      for (int bias = 0; bias < 2; ++bias) {
        if (g_small && sh.K * sh.N > (1 << 22)) continue;
        const int64_t M = sh.M, K = sh.K, N = sh.N;
        check_case(env,
                   fmt("gemv_residual[%s%s] M %lld K %lld N %lld%s", cuda::act_name(act), round_f32 ? ", f32 sum" : "",
                       (long long)M, (long long)K, (long long)N, bias ? " +bias" : ""),
                   [&](std::string &why) {
                     const auto x = rand_act(size_t(M * K), act);
                     const auto res = rand_act(size_t(M * N), Act::F32, -3, 3);
                     const auto w = rand_bf16_weights(size_t(N * K));
                     const auto b = rand_act(size_t(N), Act::F32);
                     Dev dx = upload_act(x, act);
                     DeviceBuffer dw = upload_raw(w), db = upload_raw(b);
                     const CUdeviceptr bp = bias ? db.ptr() : 0;
                     Dev fused = upload_act(res, Act::F32, 64), apart = upload_act(res, Act::F32, 64);
                     const Act pact = round_f32 ? Act::F32 : act;
                     Dev proj_out = poisoned(size_t(M * N), pact), normed = poisoned(size_t(M * N), act, 0);
                     const auto nw = rand_act(size_t(N), Act::F32, 0.5, 1.5);
                     DeviceBuffer dnw = upload_raw(nw);
                     Dev parts = poisoned(size_t(M * cuda::Ops::norm_parts(N)), Act::F32);
                     Dev xw = poisoned(size_t(M * N), act);
                     ops.gemv_residual(s, dx.ptr(), M, K, dw.ptr(), N, bp, fused.ptr(), parts.ptr(), dnw.ptr(),
                                       xw.ptr(), round_f32);
                     ops.gemv(s, dx.ptr(), M, K, dw.ptr(), N, bp, proj_out.ptr(), round_f32);
                     ops.add_rmsnorm_res32(s, apart.ptr(), proj_out.ptr(), round_f32, M, N, dnw.ptr(), eps,
                                           normed.ptr(), false);
                     bool guard = false;
                     const auto got = download(fused, &guard);
                     if (!close(got, download(apart), 0, guard, &why))
                       return why = "vs gemv + add_rmsnorm_res32: " + why, false;
                     std::vector<float> ref(size_t(M * N));
                     cpu::matmul(env.pool, x.data(), M, K, w.data(), DType::BF16, N, bias ? b.data() : nullptr,
                                 ref.data());
                     // The product against the CPU's, taken back out of the sum: the residual (up to 3) can
                     // cancel most of it, and a bound relative to the sum would then be tighter than the
                     // product's own rounding (bf16 when the sublayer output is).
                     std::vector<float> product(got.size());
                     for (size_t i = 0; i < got.size(); ++i) product[i] = float(double(got[i]) - res[i]);
                     if (!close(product, ref, tol_for(act), true, &why)) return why = "the product: " + why, false;
                     // the partials: those of the rows it left, each and summed per row (fp32 sums of 8 squares)
                     // xw: the new rows times the next norm's weight, rounded as the CPU rounds the product
                     const auto got_xw = download(xw, &guard);  // before close(): argument order is unspecified
                     if (!close(got_xw, cpu_xw(got, M, N, nw, act), 0, guard, &why)) return why = "xw: " + why, false;
                     const auto got_parts = download(parts, &guard);
                     if (!close(got_parts, cpu_ss_parts(got, M, N), 1e-5, guard, &why))
                       return why = "partial sums of squares: " + why, false;
                     const int64_t P = cuda::Ops::norm_parts(N);
                     for (int64_t m = 0; m < M; ++m) {
                       double sum = 0, want = 0;
                       for (int64_t p = 0; p < P; ++p) sum += got_parts[size_t(m * P + p)];
                       for (int64_t n = 0; n < N; ++n) want += double(got[size_t(m * N + n)]) * got[size_t(m * N + n)];
                       if (std::fabs(sum - want) > 1e-5 * want)
                         return why = fmt("row %lld: partials sum to %.9g, squares to %.9g", (long long)m, sum, want),
                                false;
                     }
                     return true;
                   });
      }
}

// embed_norm: the rows as the CPU's gather gives them (exact: fp32 out), xw = rows * norm weight rounded as the CPU
// rounds it (bitwise), and the partial sums of squares against the CPU's double sums of each 8 elements.
void test_embed_norm(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  if (!ops.has_embed_norm()) {
    std::printf("skip embed_norm[%s]: a kernel image without it\n", cuda::act_name(act));
    return;
  }
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t dim : {7, 64, 1000, 1024, 4096})
      for (int64_t T : {1, 5}) {
        const int64_t vocab = 50 + below(1000);
        std::vector<uint8_t> table(size_t(vocab * dim) * dtype_size(dt));
        for (size_t i = 0; i < table.size() / dtype_size(dt); ++i) {
          const float f = float(uni(-2, 2));
          if (dt == DType::F32) {
            std::memcpy(&table[i * 4], &f, 4);
          } else {  // f16: any finite value, subnormals included (as test_embed)
            const uint16_t h =
                dt == DType::BF16 ? to_bf16(f) : uint16_t(below(2) << 15 | below(31) << 10 | below(1024));
            std::memcpy(&table[i * 2], &h, 2);
          }
        }
        std::vector<int32_t> ids(static_cast<size_t>(T));
        for (auto &id : ids) id = int32_t(below(vocab));
        check_case(env,
                   fmt("embed_norm[%s] table %s dim %lld T %lld", cuda::act_name(act), dtype_name(dt), (long long)dim,
                       (long long)T),
                   [&](std::string &why) {
                     const auto nw = rand_act(size_t(dim), Act::F32, 0.5, 1.5);
                     DeviceBuffer dtable = upload_raw(table), dids = upload_raw(ids), dnw = upload_raw(nw);
                     Dev res = poisoned(size_t(T * dim), Act::F32), xw = poisoned(size_t(T * dim), act),
                         parts = poisoned(size_t(T * cuda::Ops::norm_parts(dim)), Act::F32);
                     ops.embed_norm(env.stream.get(), dtable.ptr(), dt, dim, dids.ptr(), T, res.ptr(), dnw.ptr(),
                                    xw.ptr(), parts.ptr());
                     std::vector<float> rows(size_t(T * dim));
                     cpu::embed(table.data(), dt, dim, ids.data(), T, rows.data());
                     // Each download before its close(): the order a call's arguments are evaluated in is unspecified.
                     bool guard = false;
                     const auto got_res = download(res, &guard);
                     if (!close(got_res, rows, 0, guard, &why)) return why = "residual: " + why, false;
                     const auto got_xw = download(xw, &guard);
                     if (!close(got_xw, cpu_xw(rows, T, dim, nw, act), 0, guard, &why))
                       return why = "xw: " + why, false;
                     const auto got_parts = download(parts, &guard);
                     if (!close(got_parts, cpu_ss_parts(rows, T, dim), 1e-6, guard, &why))
                       return why = "partial sums of squares: " + why, false;
                     return true;
                   });
      }
}

// gemv_norm_head (the batch-1 lm_head with the final norm folded in): logits = inv * (xw · w) against the CPU's
// double sums of the same, and against rmsnorm_res32 (fp32 out) + the fp32 GEMV it replaces within the op tolerance
// relative to the size of the terms, as gemv_norm's; final_rows against rmsnorm_res32's fp32 rows (the sums of
// squares in another order: a few fp32 ulps); the plain kernel (early_loads off) the same bits as the _early one.
void test_gemv_norm_head(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  if (!ops.has_gemv_norm_head()) {
    std::printf("skip gemv_norm_head[%s]: %s\n", cuda::act_name(act),
                act == Act::F32 ? "bf16 activations only" : "a kernel image without it");
    return;
  }
  cuda::Ops plain(env.ctx, act, plain_loads());
  const auto s = env.stream.get();
  const float eps = 1e-6f;
  // (K = hidden, N = vocab): Qwen3-0.6B's and 8B's lm_heads, one unit, K not a multiple of 8 (the scalar path),
  // K 4104 (a tail of chunks), N not a multiple of 8 (a partial last block).
  struct Shape { int64_t K, N; };
  const Shape shapes[] = {{1024, 151936}, {4096, 151936}, {64, 1}, {67, 13}, {4104, 5}, {256, 1001}};
  for (const Shape &sh : shapes) {
    if (g_small && sh.K * sh.N > (1 << 22)) continue;
    const int64_t K = sh.K, N = sh.N;
    check_case(env, fmt("gemv_norm_head[%s] K %lld N %lld", cuda::act_name(act), (long long)K, (long long)N),
               [&](std::string &why) {
                 const auto res = rand_act(size_t(K), Act::F32, -3, 3);
                 const auto nw = rand_act(size_t(K), Act::F32, 0.5, 1.5);
                 const auto w = rand_bf16_weights(size_t(N * K));
                 DeviceBuffer dres = upload_raw(res), dnw = upload_raw(nw), dw = upload_raw(w),
                              dss = upload_raw(cpu_ss_parts(res, 1, K));
                 const auto xw = cpu_xw(res, 1, K, nw, act);
                 Dev dxw = upload_act(xw, act);
                 Dev logits = poisoned(size_t(N), Act::F32), rows = poisoned(size_t(K), Act::F32);
                 Dev logits2 = poisoned(size_t(N), Act::F32), rows2 = poisoned(size_t(K), Act::F32);
                 Dev normed = poisoned(size_t(K), Act::F32), apart = poisoned(size_t(N), Act::F32);
                 ops.gemv_norm_head(s, dxw.ptr(), dss.ptr(), K, eps, dw.ptr(), N, logits.ptr(), dres.ptr(), dnw.ptr(),
                                    rows.ptr());
                 plain.gemv_norm_head(s, dxw.ptr(), dss.ptr(), K, eps, dw.ptr(), N, logits2.ptr(), dres.ptr(),
                                      dnw.ptr(), rows2.ptr());
                 ops.rmsnorm_res32(s, dres.ptr(), 1, K, dnw.ptr(), eps, normed.ptr(), /*out_f32=*/true);
                 ops.gemv(s, normed.ptr(), 1, K, dw.ptr(), N, 0, apart.ptr(), /*y_f32=*/true, /*x_f32=*/true);
                 bool guard = false, rows_guard = false;
                 const auto got = download(logits, &guard), got_rows = download(rows, &rows_guard);
                 const auto prod = cpu_scaled_product(res, xw, 1, K, w, N, eps);
                 const std::vector<float> ref(prod.begin(), prod.end());
                 if (!close(got, ref, tol_for(act), guard, &why)) return why = "logits: " + why, false;
                 const auto terms = cpu_scaled_product(res, xw, 1, K, w, N, eps, true);
                 double tss = 0;
                 for (double t : terms) tss += t * t;
                 if (!close(got, download(apart), tol_for(act), true, &why, std::sqrt(tss / double(terms.size()))))
                   return why = "logits vs rmsnorm + gemv: " + why, false;
                 if (!close(got_rows, download(normed), 1e-6, rows_guard, &why))
                   return why = "final rows vs rmsnorm_res32: " + why, false;
                 if (!close(download(logits2), got, 0, true, &why) || !close(download(rows2), got_rows, 0, true, &why))
                   return why = "plain vs early kernel: " + why, false;
                 return true;
               });
  }
}

void test_gemv_early(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const auto s = env.stream.get();
  const float eps = 1e-6f;
  // ops launches the *_early kernels (the default under PDL); `plain` the null control's.
  cuda::Ops plain(env.ctx, act, plain_loads());
  const bool fused = ops.fused_gemv_available();
  struct Shape { int64_t M, H, N, I; };  // rows, hidden, q|k|v rows, intermediate
  const Shape shapes[] = {{1, 1024, 4096, 3072}, {3, 1024, 4096, 3072}, {1, 4096, 6144, 12288}, {2, 64, 40, 24}};
  for (const Shape &sh : shapes) {
    if (g_small && sh.H * sh.I > (1 << 21)) continue;
    const int64_t M = sh.M, H = sh.H, N = sh.N, I = sh.I;
    check_case(env,
               fmt("gemv early loads[%s]%s%s M %lld hidden %lld: a layer's chain of every GEMV form, the same bits",
                   cuda::act_name(act), ops.early_loads() ? "" : " (no PDL here: the plain kernels)",
                   fused ? "" : " (no fused-norm forms in this build)", (long long)M, (long long)H),
               [&](std::string &why) {
                 const auto res = rand_act(size_t(M * H), Act::F32, -3, 3);
                 const auto nw = rand_act(size_t(H), Act::F32, 0.5, 1.5);
                 const auto wqkv = rand_bf16_weights(size_t(N * H)), wo = rand_bf16_weights(size_t(H * N));
                 const auto wgu = rand_bf16_weights(size_t(2 * I * H)), wd = rand_bf16_weights(size_t(H * I));
                 DeviceBuffer dnw = upload_raw(nw), dqkv = upload_raw(wqkv), dwo = upload_raw(wo),
                              dgu = upload_raw(wgu), dwd = upload_raw(wd);
                 // One layer's decode chain (each kernel reads what the previous one wrote): the fused-norm forms
                 // where the build has them, then the plain o/down GEMVs with their norms, gemv_swiglu and gemv; every
                 // output downloaded.
                 auto layer = [&](cuda::Ops &o, std::vector<std::vector<float>> &out) {
                   Dev r = upload_act(res, Act::F32, 64);
                   Dev qkv = poisoned(size_t(M * N), act), a = poisoned(size_t(M * I), act);
                   Dev y = poisoned(size_t(M * N), act), g = poisoned(size_t(M * I), act);
                   Dev normed = poisoned(size_t(M * H), act), d = poisoned(size_t(M * H), act);
                   DeviceBuffer ss = upload_raw(cpu_ss_parts(res, M, H));  // the first norm's partials
                   Dev xw = upload_act(cpu_xw(res, M, H, nw, act), act);    // and rows times its weight
                   if (fused) {
                     o.gemv_norm(s, xw.ptr(), ss.ptr(), M, H, eps, dqkv.ptr(), N, 0, qkv.ptr());
                     o.gemv_residual(s, qkv.ptr(), M, N, dwo.ptr(), H, 0, r.ptr(), ss.ptr(), dnw.ptr(), xw.ptr());
                     o.gemv_swiglu_norm(s, xw.ptr(), ss.ptr(), M, H, eps, dgu.ptr(), I, a.ptr());
                     o.gemv_residual(s, a.ptr(), M, I, dwd.ptr(), H, 0, r.ptr(), ss.ptr(), dnw.ptr(), xw.ptr());
                   } else {
                     o.rmsnorm_res32(s, r.ptr(), M, H, dnw.ptr(), eps, normed.ptr());
                     o.gemv(s, normed.ptr(), M, H, dqkv.ptr(), N, 0, qkv.ptr());
                     o.gemv_swiglu(s, normed.ptr(), M, H, dgu.ptr(), I, a.ptr());
                   }
                   o.gemv(s, qkv.ptr(), M, N, dwo.ptr(), H, 0, d.ptr());
                   o.add_rmsnorm_res32(s, r.ptr(), d.ptr(), false, M, H, dnw.ptr(), eps, normed.ptr(), false);
                   o.gemv_swiglu(s, normed.ptr(), M, H, dgu.ptr(), I, g.ptr());
                   o.gemv(s, g.ptr(), M, I, dwd.ptr(), H, 0, d.ptr());
                   o.add_rmsnorm_res32(s, r.ptr(), d.ptr(), false, M, H, dnw.ptr(), eps, normed.ptr(), false);
                   o.gemv(s, normed.ptr(), M, H, dqkv.ptr(), N, 0, y.ptr());
                   bool all = true;
                   for (const Dev *dv : {&r, &qkv, &a, &y, &g, &normed, &d, &xw}) {
                     bool guard = false;
                     out.push_back(download(*dv, &guard));
                     all = all && guard;
                   }
                   return all;
                 };
                 std::vector<std::vector<float>> slow, fast;
                 if (!layer(plain, slow) || !layer(ops, fast)) return why = "wrote past the end of an output", false;
                 const char *names[] = {"residual", "q|k|v", "swiglu", "gemv", "gemv_swiglu", "normed", "down", "xw"};
                 for (size_t i = 0; i < slow.size(); ++i)
                   if (!close(fast[i], slow[i], 0, true, &why)) return why = std::string(names[i]) + ": " + why, false;
                 return true;
               });
  }
}

}  // namespace cuda_tests
