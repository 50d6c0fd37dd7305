// CUDA op checks: the decode GEMV (every decode shape, a batch row equal to the row alone) and the SwiGLU GEMV.
#include "../cuda_check.h"

namespace cuda_tests {

void test_gemv(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  struct Shape { int64_t M, K, N; };
  const Shape shapes[] = {{1, 64, 1},    {1, 4096, 37},  {3, 4096, 100}, {8, 1024, 257}, {5, 1000, 33},
                          {13, 256, 67}, {1, 12288, 96}, {2, 67, 13},    {1, 8, 2048},   {7, 520, 130},
                          {16, 136, 9},  {1, 4104, 5}};
  for (const Shape &sh : shapes)
    for (int bias = 0; bias < 2; ++bias) {
      if (g_small && sh.K * sh.N > (1 << 20)) continue;
      for (int y_f32 = 0; y_f32 < (act == Act::BF16 ? 2 : 1); ++y_f32)
        for (int misaligned = 0; misaligned < (sh.K % 8 == 0 && sh.M == 1 ? 2 : 1); ++misaligned)
          check_case(env,
                     fmt("gemv[%s%s] M %lld K %lld N %lld%s%s", cuda::act_name(act), y_f32 ? "->f32" : "",
                         (long long)sh.M, (long long)sh.K, (long long)sh.N, bias ? " +bias" : "",
                         misaligned ? " x misaligned" : ""),
                     [&](std::string &why) {
                       auto x = rand_act(size_t(sh.M * sh.K) + 8, act);
                       std::vector<uint16_t> w(size_t(sh.N * sh.K));
                       for (auto &e : w) e = to_bf16(float(uni(-1, 1)));
                       auto b = rand_act(size_t(sh.N), Act::F32);
                       Dev dx = upload_act(x, act);
                       DeviceBuffer dw = upload_raw(w), db = upload_raw(b);
                       const Act yact = y_f32 ? Act::F32 : act;
                       Dev y = poisoned(size_t(sh.M * sh.N), yact);
                       const int64_t off = misaligned ? 1 : 0;  // x one element in: 16-byte loads impossible
                       ops.gemv(env.stream.get(), dx.ptr() + CUdeviceptr(off * int64_t(cuda::act_size(act))), sh.M, sh.K,
                                dw.ptr(), sh.N, bias ? db.ptr() : 0, y.ptr(), y_f32);
                       env.stream.synchronize();
                       std::vector<float> ref(size_t(sh.M * sh.N));
                       cpu::matmul(env.pool, x.data() + off, sh.M, sh.K, w.data(), DType::BF16, sh.N,
                                   bias ? b.data() : nullptr, ref.data());
                       bool guard = false;
                       const auto got = download(y, &guard);  // before close() reads guard
                       const double tol = tol_for(yact);
                       return close(got, ref, tol, guard, &why,
                                    accumulation_floor(dot_terms_rms(x.data() + off, sh.M, sh.K, w, sh.N), sh.K, tol));
                     });
    }
}

// n bf16 weights uniform in [-1, 1) (to 2^-15), four from each 64-bit draw: fast enough for an lm_head's 600 M.
std::vector<uint16_t> rand_bf16_weights(size_t n) {
  std::vector<uint16_t> w(n);
  for (size_t i = 0; i < n; i += 4) {
    uint64_t r = g_rng();
    for (size_t j = i; j < std::min(n, i + 4); ++j, r >>= 16)
      w[j] = to_bf16(float(int32_t(r & 0xffff) - 32768) / 32768.f);
  }
  return w;
}

// Each of the M rows of a batched result (got, M × n_out) against the same op on that row of x alone, bit for
// bit: a sequence's activations and logits must not depend on what else is in the batch. run_row(m, out)
// launches the op for row m alone into out (n_out elements in yact).
template <class F>
bool rows_match_alone(const std::vector<float> &got, int64_t M, int64_t n_out, Act yact, F run_row, std::string *why) {
  for (int64_t m = 0; m < M; ++m) {
    Dev one = poisoned(size_t(n_out), yact);
    run_row(m, one.ptr());
    bool guard = false;
    const auto alone = download(one, &guard);  // waits for the stream
    const std::vector<float> batched(got.begin() + m * n_out, got.begin() + (m + 1) * n_out);
    if (!close(alone, batched, 0, guard, why)) return *why = fmt("row %lld alone vs in the batch: ", (long long)m) + *why, false;
  }
  return true;
}

// Qwen3-8B's and Qwen3-0.6B's decode products, q|k|v and gate|up fused as the engine stores them, at M = 1, 3
// (launches of 2 + 1 rows) and 8, each against the CPU and each row of a batch against itself alone. The qkv
// shapes carry a bias (Qwen2's); the lm_head runs as the engine calls it, fp32 x and logits.
void test_gemv_decode_shapes(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  struct Shape { const char *name; int64_t K, N; };
  const Shape shapes[] = {{"8B qkv", 4096, 6144},         {"8B o_proj", 4096, 4096},     {"8B gate_up", 4096, 24576},
                          {"8B down_proj", 12288, 4096},  {"8B lm_head", 4096, 151936},  {"0.6B qkv", 1024, 4096},
                          {"0.6B o_proj", 2048, 1024},    {"0.6B gate_up", 1024, 6144},  {"0.6B down_proj", 3072, 1024},
                          {"0.6B lm_head", 1024, 151936}};
  for (const Shape &sh : shapes) {
    if (g_small && sh.K * sh.N > (1 << 22)) continue;
    const bool lm_head = std::strstr(sh.name, "lm_head") != nullptr, qkv = std::strstr(sh.name, "qkv") != nullptr;
    const std::vector<uint16_t> w = rand_bf16_weights(size_t(sh.N * sh.K));
    const std::vector<float> b = rand_act(size_t(sh.N), Act::F32);
    DeviceBuffer dw = upload_raw(w), db = upload_raw(b);
    const Act xyact = lm_head ? Act::F32 : act;  // x's and y's type
    for (int64_t M : {1, 3, 8})
      check_case(env,
                 fmt("gemv[%s] %s M %lld K %lld N %lld%s", cuda::act_name(act), sh.name, (long long)M, (long long)sh.K,
                     (long long)sh.N, qkv ? " +bias" : lm_head ? " x, y f32" : ""),
                 [&](std::string &why) {
                   const auto x = rand_act(size_t(M * sh.K), xyact);
                   Dev dx = upload_act(x, xyact);
                   Dev y = poisoned(size_t(M * sh.N), xyact);
                   const CUdeviceptr bias = qkv ? db.ptr() : 0;
                   ops.gemv(env.stream.get(), dx.ptr(), M, sh.K, dw.ptr(), sh.N, bias, y.ptr(), lm_head, lm_head);
                   env.stream.synchronize();
                   std::vector<float> ref(size_t(M * sh.N));
                   cpu::matmul(env.pool, x.data(), M, sh.K, w.data(), DType::BF16, sh.N, qkv ? b.data() : nullptr,
                               ref.data());
                   bool guard = false;
                   const auto got = download(y, &guard);  // before close() reads guard
                   if (!close(got, ref, tol_for(xyact), guard, &why)) return false;
                   const int64_t xs = int64_t(cuda::act_size(xyact));
                   return M == 1 || rows_match_alone(got, M, sh.N, xyact, [&](int64_t m, CUdeviceptr row) {
                            ops.gemv(env.stream.get(), dx.ptr() + CUdeviceptr(m * sh.K * xs), 1, sh.K, dw.ptr(), sh.N,
                                     bias, row, lm_head, lm_head);
                          }, &why);
                 });
  }
}

// gemv_swiglu against the CPU: cpu::matmul over the whole gate_up(2I, K) matrix, then silu(gate) * up in
// double. Shapes from one unit to Qwen3-8B's and 0.6B's MLPs, M up to 16 (launches of 8 + 4 + 1 rows for 13),
// K not a multiple of 8 or x one element in (the scalar path). Also: silu(gate) * up computed on the CPU from
// gemv's fp32 sums over the same matrix agrees to expf's rounding (fp32) or the output's (bf16), which pins
// gate to rows [0, I) and up to [I, 2I) exactly as gemv reads them; and each row of a batch is bit for bit
// the row alone.
void test_gemv_swiglu(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const int64_t es = int64_t(cuda::act_size(act));
  struct Shape { int64_t M, K, I; };
  const Shape shapes[] = {{1, 64, 1},     {1, 4096, 37},   {3, 1000, 33},   {8, 1024, 257},    {5, 520, 130},
                          {2, 67, 13},    {13, 256, 67},   {1, 8, 2048},    {16, 136, 9},      {1, 4104, 5},
                          {1, 1024, 3072}, {8, 1024, 3072}, {1, 4096, 12288}, {3, 4096, 12288}, {8, 4096, 12288}};
  for (const Shape &sh : shapes)
    for (int misaligned = 0; misaligned < (sh.K % 8 == 0 && sh.M == 1 ? 2 : 1); ++misaligned) {
      if (g_small && 2 * sh.I * sh.K > (1 << 22)) continue;
      check_case(env,
                 fmt("gemv_swiglu[%s] M %lld K %lld I %lld%s", cuda::act_name(act), (long long)sh.M, (long long)sh.K,
                     (long long)sh.I, misaligned ? " x misaligned" : ""),
                 [&](std::string &why) {
                   const int64_t M = sh.M, K = sh.K, I = sh.I, off = misaligned ? 1 : 0;
                   const auto x = rand_act(size_t(M * K) + 8, act);
                   const auto w = rand_bf16_weights(size_t(2 * I * K));
                   Dev dx = upload_act(x, act);
                   DeviceBuffer dw = upload_raw(w);
                   Dev y = poisoned(size_t(M * I), act);
                   const CUdeviceptr xp = dx.ptr() + CUdeviceptr(off * es);
                   ops.gemv_swiglu(env.stream.get(), xp, M, K, dw.ptr(), I, y.ptr());
                   env.stream.synchronize();
                   std::vector<float> gu(size_t(M * 2 * I)), ref(size_t(M * I));
                   cpu::matmul(env.pool, x.data() + off, M, K, w.data(), DType::BF16, 2 * I, nullptr, gu.data());
                   for (int64_t m = 0; m < M; ++m)
                     for (int64_t i = 0; i < I; ++i) {
                       const double g = gu[size_t(m * 2 * I + i)], u = gu[size_t(m * 2 * I + I + i)];
                       ref[size_t(m * I + i)] = float(g / (1 + std::exp(-g)) * u);
                     }
                   // The bound relative to silu(g) * u's sensitivity to its sums' rounding too: one output (I 1) has no
                   // rms to stand for the terms (K 64 missed the plain bound by 1.14x on the H100, fp32).
                   const double f_rms = swiglu_sensitivity_rms(gu, M, I, [&](int64_t m, int64_t j) {
                     double ss = 0;
                     for (int64_t k = 0; k < K; ++k) {
                       const double t = double(x[size_t(off + m * K + k)]) * bf16_to_f32(w[size_t(j * K + k)]);
                       ss += t * t;
                     }
                     return std::sqrt(ss);
                   });
                   bool guard = false;
                   const auto got = download(y, &guard);  // before close() reads guard
                   if (!close(got, ref, tol_for(act), guard, &why, accumulation_floor(f_rms, K, tol_for(act)))) return false;

                   Dev sums = poisoned(size_t(M * 2 * I), Act::F32);
                   ops.gemv(env.stream.get(), xp, M, K, dw.ptr(), 2 * I, 0, sums.ptr(), /*y_f32=*/true);
                   const auto gs = download(sums);
                   std::vector<float> from_gemv(size_t(M * I));
                   for (int64_t m = 0; m < M; ++m)
                     for (int64_t i = 0; i < I; ++i) {
                       const float g = gs[size_t(m * 2 * I + i)], u = gs[size_t(m * 2 * I + I + i)];
                       from_gemv[size_t(m * I + i)] = g / (1.f + std::exp(-g)) * u;
                     }
                   if (!close(got, from_gemv, act == Act::F32 ? 1e-6 : 4e-3, true, &why))
                     return why = "vs silu * up of gemv's sums: " + why, false;

                   return M == 1 || rows_match_alone(got, M, I, act, [&](int64_t m, CUdeviceptr row) {
                            ops.gemv_swiglu(env.stream.get(), xp + CUdeviceptr(m * K * es), 1, K, dw.ptr(), I, row);
                          }, &why);
                 });
    }
}


}  // namespace cuda_tests
