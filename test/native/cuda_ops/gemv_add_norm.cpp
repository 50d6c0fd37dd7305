// CUDA op checks: Ops::gemv_add_norm, the o_proj / down_proj GEMV whose last block runs the residual add +
// RMSNorm after it. Its claim is "bitwise gemv + add_rmsnorm_res32 in one launch", so it is held to that with
// tolerance 0 (its product output, the residual stream and the normed rows), over two calls in a row that share
// one ticket (the second only finds its last block when the first put the ticket back to zero), and once
// against the CPU within the op tolerance. The ticket must be zero again afterwards.
#include "../cuda_check.h"

namespace cuda_tests {

std::vector<uint16_t> rand_bf16_weights(size_t n);  // gemv.cpp

void test_gemv_add_norm(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const auto s = env.stream.get();
  const float eps = 1e-6f;
  // (M, K, N = hidden): one unit; Qwen3-0.6B's o/down and 8B's; M 13 = launches of 8 + 4 + 1 rows (each with its
  // own last block); K not a multiple of 8 (the scalar path); N not a multiple of the 8 rows a block takes.
  struct Shape { int64_t M, K, N; };
  const Shape shapes[] = {{1, 64, 1},        {1, 2048, 1024}, {3, 3072, 1024}, {1, 4096, 4096},
                          {4, 12288, 4096},  {13, 256, 67},   {2, 67, 13},     {8, 520, 130}};
  for (const Shape &sh : shapes)
    for (int out_f32 = 0; out_f32 < (act == Act::BF16 ? 2 : 1); ++out_f32)
      for (int bias = 0; bias < 2; ++bias) {
        if (g_small && sh.K * sh.N > (1 << 22)) continue;
        const int64_t M = sh.M, K = sh.K, N = sh.N;
        check_case(
            env,
            fmt("gemv_add_norm[%s%s] M %lld K %lld N %lld%s: gemv + add_rmsnorm_res32 bit for bit, twice", cuda::act_name(act),
                out_f32 ? ", fp32 out" : "", (long long)M, (long long)K, (long long)N, bias ? " +bias" : ""),
            [&](std::string &why) {
              const auto x = rand_act(size_t(M * K), act);
              const auto res = rand_act(size_t(M * N), Act::F32, -3, 3);
              const auto w = rand_bf16_weights(size_t(N * K));
              const auto b = rand_act(size_t(N), Act::F32);
              const auto nw = rand_act(size_t(N), Act::F32, 0.5, 1.5);
              Dev dx = upload_act(x, act);
              DeviceBuffer dw = upload_raw(w), db = upload_raw(b), dnw = upload_raw(nw);
              DeviceBuffer ticket = upload_raw(std::vector<uint32_t>{0});
              const CUdeviceptr bp = bias ? db.ptr() : 0;
              const Act oact = out_f32 ? Act::F32 : act;
              Dev fres = upload_act(res, Act::F32, 64), ares = upload_act(res, Act::F32, 64);
              Dev fy = poisoned(size_t(M * N), act), ay = poisoned(size_t(M * N), act);
              Dev fout = poisoned(size_t(M * N), oact), aout = poisoned(size_t(M * N), oact);
              auto fused = [&] {
                ops.gemv_add_norm(s, dx.ptr(), M, K, dw.ptr(), N, bp, fy.ptr(), fres.ptr(), dnw.ptr(), eps, fout.ptr(),
                                  out_f32, ticket.ptr());
              };
              auto apart = [&] {
                ops.gemv(s, dx.ptr(), M, K, dw.ptr(), N, bp, ay.ptr());
                ops.add_rmsnorm_res32(s, ares.ptr(), ay.ptr(), false, M, N, dnw.ptr(), eps, aout.ptr(), out_f32);
              };
              fused();
              apart();
              // Against the CPU after one call: residual + round(x · wᵀ + b), then its norm.
              bool guard = false;
              const auto got_res = download(fres, &guard), got_out = download(fout);
              std::vector<float> y(size_t(M * N));
              cpu::matmul(env.pool, x.data(), M, K, w.data(), DType::BF16, N, bias ? b.data() : nullptr, y.data());
              std::vector<float> ref_res(res);
              for (size_t i = 0; i < y.size(); ++i)
                ref_res[i] += act == Act::BF16 ? bf16_to_f32(to_bf16(y[i])) : y[i];
              if (!close(got_res, ref_res, tol_for(act), guard, &why)) return why = "residual vs the CPU: " + why, false;
              std::vector<float> ref_out(ref_res.size());
              for (int64_t m = 0; m < M; ++m) {
                double ss = 0;
                for (int64_t n = 0; n < N; ++n) ss += double(got_res[size_t(m * N + n)]) * got_res[size_t(m * N + n)];
                const double inv = 1 / std::sqrt(ss / double(N) + eps);
                for (int64_t n = 0; n < N; ++n) ref_out[size_t(m * N + n)] = float(got_res[size_t(m * N + n)] * inv * nw[size_t(n)]);
              }
              if (!close(got_out, ref_out, tol_for(oact), true, &why)) return why = "normed rows vs the CPU: " + why, false;
              // A second call on the same ticket, then every output against the separate kernels, to the bit.
              fused();
              apart();
              const char *names[] = {"residual", "product", "normed rows"};
              const Dev *f[] = {&fres, &fy, &fout}, *a[] = {&ares, &ay, &aout};
              for (int i = 0; i < 3; ++i) {
                bool g = false;
                if (!close(download(*f[i], &g), download(*a[i]), 0, g, &why))
                  return why = std::string(names[i]) + " vs gemv + add_rmsnorm_res32: " + why, false;
              }
              uint32_t t = 1;
              ticket.download(g_stream, &t, 4);
              if (t != 0) return why = "the ticket was left at " + std::to_string(t), false;
              return true;
            });
      }
}

}  // namespace cuda_tests
