// CUDA op checks: our tensor-core GEMMs (tensor_gemm.h), every tile this GPU has, every epilogue, against a float64
// reference computed here and against the CPU op (cpu::matmul), over ragged shapes (M, N, K multiples of no tile;
// K from one 8-element chunk to thousands), with and without bias, split-K forced on and off; then the table's own
// choice on the models' shapes, split-K calls of different shapes sharing the tickets back to back, and a product
// captured into a CUDA graph and replayed over new inputs.
#include "../cuda_check.h"

#include "backend/cuda/tensor_gemm.h"

namespace cuda_tests {

std::vector<uint16_t> rand_bf16_weights(size_t n);  // gemv.cpp

namespace {

using Out = cuda::TensorGemm::Out;

// y(M, N or N/2) in double from the bf16 values: x·wᵀ (+ bias), or silu(gate)·up for SwiGLU.
std::vector<float> reference64(const std::vector<float> &x, int64_t M, int64_t K, const std::vector<uint16_t> &w,
                               int64_t N, const float *bias, Out out) {
  std::vector<double> wd(w.size());
  for (size_t i = 0; i < w.size(); ++i) wd[i] = bf16_to_f32(w[i]);
  auto dot = [&](int64_t m, int64_t n) {
    double s = 0;
    for (int64_t k = 0; k < K; ++k) s += double(x[size_t(m * K + k)]) * wd[size_t(n * K + k)];
    return s;
  };
  const int64_t W = out == Out::kSwiGLU ? N / 2 : N;
  std::vector<float> y(size_t(M * W));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < W; ++n) {
      double v;
      if (out == Out::kSwiGLU) {
        const double g = dot(m, n), u = dot(m, W + n);
        v = g / (1 + std::exp(-g)) * u;
      } else {
        v = dot(m, n) + (bias ? bias[n] : 0.0);
      }
      y[size_t(m * W + n)] = float(v);
    }
  return y;
}

// The CPU op's result for the same product (fp32 sums), SwiGLU applied after it in double.
std::vector<float> reference_cpu(Env &env, const std::vector<float> &x, int64_t M, int64_t K,
                                 const std::vector<uint16_t> &w, int64_t N, const float *bias, Out out) {
  std::vector<float> full(size_t(M * N));
  cpu::matmul(env.pool, x.data(), M, K, w.data(), DType::BF16, N, out == Out::kSwiGLU ? nullptr : bias, full.data());
  if (out != Out::kSwiGLU) return full;
  const int64_t I = N / 2;
  std::vector<float> y(size_t(M * I));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < I; ++i) {
      const double g = full[size_t(m * N + i)], u = full[size_t(m * N + I + i)];
      y[size_t(m * I + i)] = float(g / (1 + std::exp(-g)) * u);
    }
  return y;
}

// dot_terms_rms (cuda_check.h) over at most 16 x 16 (row, column) pairs spread over the output: the full one is
// M·N·K terms, too slow for a prefill-sized product, and the terms are alike.
double terms_rms_sampled(const std::vector<float> &x, int64_t M, int64_t K, const std::vector<uint16_t> &w, int64_t N) {
  double total = 0;
  int64_t count = 0;
  const int64_t sm = std::min<int64_t>(M, 16), sn = std::min<int64_t>(N, 16);
  for (int64_t i = 0; i < sm; ++i)
    for (int64_t j = 0; j < sn; ++j) {
      const int64_t m = i * M / sm, n = j * N / sn;
      double ss = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = double(x[size_t(m * K + k)]) * bf16_to_f32(w[size_t(n * K + k)]);
        ss += t * t;
      }
      total += ss, ++count;
    }
  return count ? std::sqrt(total / double(count)) : 0;
}

double tol_for_out(Out out) { return out == Out::kF32 ? 1e-5 : 1e-2; }

// Runs one product and checks it against both references. splits 0: the table's choice for the tile's rows.
bool check_product(Env &env, cuda::TensorGemm &gemm, int tile, int splits, Out out, int64_t M, int64_t K, int64_t N,
                   bool with_bias, bool f64, std::string &why) {
  const auto x = rand_act(size_t(M * K), Act::BF16);
  const auto w = rand_bf16_weights(size_t(N * K));
  const auto b = rand_act(size_t(N), Act::F32);
  Dev dx = upload_act(x, Act::BF16);
  DeviceBuffer dw = upload_raw(w), db = upload_raw(b);
  const int64_t W = out == Out::kSwiGLU ? N / 2 : N;
  const Act yact = out == Out::kF32 ? Act::F32 : Act::BF16;
  Dev y = poisoned(size_t(M * W), yact);
  cuda::TensorGemm::Choice c{tile, 1};
  if (tile >= 0 && splits > 0) c.splits = splits;
  if (tile >= 0 && splits == 0) c = gemm.with_splits(tile, M, N, K, out, 2 * env.ctx.sm_count());
  if (tile >= 0) gemm.run(env.stream.get(), dx.ptr(), M, K, dw.ptr(), N, with_bias ? db.ptr() : 0, y.ptr(), out, c);
  else gemm.run(env.stream.get(), dx.ptr(), M, K, dw.ptr(), N, with_bias ? db.ptr() : 0, y.ptr(), out);
  env.stream.synchronize();
  bool guard = false;
  const auto got = download(y, &guard);
  const float *bias = with_bias ? b.data() : nullptr;
  const double tol = tol_for_out(out);
  // SwiGLU's output moves with the sums by up to about |up| + |gate| times their error: the floor scales with it.
  // accumulation_floor is two standard deviations of one output's rounding walk; the worst of n outputs strays
  // about sqrt(2 ln n) of them (a 2048 x 4096 fp32 product missed 2 sigma by 1.3x on the H100 at 8.4 M outputs).
  const double n_out = double(M) * double(W);
  const double spread = std::max(1.0, std::sqrt(2 * std::log(std::max(n_out, 2.0))) / 2);
  const double floor =
      accumulation_floor(terms_rms_sampled(x, M, K, w, N), K, tol) * (out == Out::kSwiGLU ? 4 : 1) * spread;
  if (f64 && !close(got, reference64(x, M, K, w, N, bias, out), tol, guard, &why, floor))
    return why = "vs float64: " + why, false;
  // Against cpu::matmul, itself an fp32 sum: two independent rounding walks, sqrt(2) one's spread (the H100 run of
  // 0114e11: chosen[f32] M 96 K 12288 N 4096 missed the single-walk floor by 1.22x, its float64 check passing).
  if (!close(got, reference_cpu(env, x, M, K, w, N, bias, out), tol, guard, &why, floor * std::sqrt(2.0)))
    return why = "vs cpu::matmul: " + why, false;
  return true;
}

}  // namespace

void test_tensor_gemm(Env &env) {
  cuda::TensorGemm gemm(env.ctx, env.stream.get());
  if (!gemm.available()) {
    record(false, "tensor-core gemm kernels present", gemm.reason());
    return;
  }
  struct Shape { int64_t M, K, N; };
  // Ragged everywhere: M, N and K multiples of no tile (K of one 8-element chunk, of fewer than one BK step, of
  // many), N odd (the paired stores' other path), a single row and a single column.
  const Shape ragged[] = {{1, 8, 1},      {3, 24, 7},      {17, 72, 33},    {33, 136, 130},  {65, 200, 257},
                          {130, 520, 129}, {129, 1032, 300}, {300, 264, 515}, {20, 4000, 96},  {2, 16, 2050},
                          {4200, 72, 1100}};
  for (int tile = 0; tile < cuda::TensorGemm::kTileCount; ++tile) {
    const auto &t = cuda::TensorGemm::kTiles[tile];
    if (t.wgmma && !gemm.has_wgmma()) continue;
    for (int o = 0; o < 3; ++o) {
      const Out out = Out(o);
      for (size_t i = 0; i < std::size(ragged); ++i) {
        const Shape &sh = ragged[i];
        // The last: more tiles (or tile pairs) than SMs, so each block of a persistent wgmma grid takes several
        // work items in turn (stages and barrier phases carried from one to the next); the mma tiles' grid is the
        // tiles, nothing new there.
        if (i + 1 == std::size(ragged) && !t.wgmma) continue;
        const int64_t N = out == Out::kSwiGLU ? 2 * sh.N : sh.N;
        const bool bias = out != Out::kSwiGLU && i % 2 == 1;
        // split-K: off, forced to 3 (ragged K shares: some splits may get no K at all on tiny K), the fill rule
        for (int splits : {1, 3, 0}) {
          if (splits != 1 && i % 3 != 0 && sh.K < 1000) continue;  // (a sample of the shapes: the runtime)
          if (splits != 1 && t.multicast) continue;                   // (never split)
          check_case(env,
                     fmt("tensor_gemm %s[%s] M %lld K %lld N %lld%s%s", t.name, cuda::out_name(out), (long long)sh.M,
                         (long long)sh.K, (long long)N, bias ? " +bias" : "",
                         splits == 1 ? "" : splits == 3 ? " split-K 3" : " split-K (fill)"),
                     [&](std::string &why) {
                       return check_product(env, gemm, tile, splits, out, sh.M, sh.K, N, bias, true, why);
                     });
        }
      }
    }
  }

  // The table's choice on the models' shapes (Qwen3-0.6B and -8B: qkv, o, gate|up as SwiGLU, down; the 0.6B
  // lm_head's fp32 logits), rows from batched decode to a prefill chunk; against cpu::matmul (float64 is too slow).
  const Shape model[] = {{9, 1024, 4096},   {32, 1024, 2048},  {64, 1024, 6144},   {128, 3072, 1024},
                         {200, 1024, 151936}, {512, 4096, 6144}, {2048, 4096, 4096}, {17, 4096, 24576},
                         {96, 12288, 4096}};
  for (const Shape &sh : model)
    for (int o = 0; o < 3; ++o) {
      const Out out = Out(o);
      if (g_small && sh.M * sh.N * sh.K > (int64_t(1) << 30)) continue;
      if ((out == Out::kSwiGLU) != (sh.N == 6144 || sh.N == 24576)) continue;  // gate|up rows only
      if (out == Out::kF32 && sh.N != 151936 && sh.N != 4096) continue;
      check_case(env,
                 fmt("tensor_gemm chosen[%s] M %lld K %lld N %lld", cuda::out_name(out), (long long)sh.M,
                     (long long)sh.K, (long long)sh.N),
                 [&](std::string &why) { return check_product(env, gemm, -1, 1, out, sh.M, sh.K, sh.N, false, false, why); });
    }

  // Split-K calls of different tile counts back to back on one stream, no wait between: each must leave its tickets
  // at zero for the next (a ticket left over would make a later tile's first split the "last" one).
  check_case(env, "tensor_gemm split-K calls share the tickets", [&](std::string &why) {
    // mma calls, and on Hopper wgmma ones between them: both kinds share the tickets
    const int mma = cuda::TensorGemm::tile_index("mma_m16n128");
    const int wg = gemm.has_wgmma() ? cuda::TensorGemm::tile_index("wgmma_m64n256") : mma;
    struct Call { int64_t M, K, N; int splits, tile; };
    const Call calls[] = {{5, 2048, 640, 4, mma}, {16, 4096, 256, 7, wg}, {3, 1024, 1280, 2, mma},
                          {9, 2048, 600, 5, wg},  {5, 2048, 640, 4, mma}};
    std::vector<std::vector<float>> xs, refs;
    std::vector<std::vector<uint16_t>> ws;
    std::vector<Dev> dxs, ys;
    std::vector<DeviceBuffer> dws;
    for (const Call &c : calls) {
      xs.push_back(rand_act(size_t(c.M * c.K), Act::BF16));
      ws.push_back(rand_bf16_weights(size_t(c.N * c.K)));
      dxs.push_back(upload_act(xs.back(), Act::BF16));
      dws.push_back(upload_raw(ws.back()));
      ys.push_back(poisoned(size_t(c.M * c.N), Act::F32));
    }
    for (size_t i = 0; i < std::size(calls); ++i)
      gemm.run(env.stream.get(), dxs[i].ptr(), calls[i].M, calls[i].K, dws[i].ptr(), calls[i].N, 0, ys[i].ptr(),
               Out::kF32, {calls[i].tile, calls[i].splits});
    env.stream.synchronize();
    for (size_t i = 0; i < std::size(calls); ++i) {
      const Call &c = calls[i];
      bool guard = false;
      const auto got = download(ys[i], &guard);
      const auto ref = reference_cpu(env, xs[i], c.M, c.K, ws[i], c.N, nullptr, Out::kF32);
      if (!close(got, ref, 1e-5, guard, &why, accumulation_floor(terms_rms_sampled(xs[i], c.M, c.K, ws[i], c.N), c.K, 1e-5)))
        return why = fmt("call %zu: ", i) + why, false;
    }
    return true;
  });

  // Captured into a graph (as the decode steps are) and replayed over new x at the same address, split-K on: the
  // largest tile this GPU has (wgmma's tensor maps are baked into the graph's parameters) and an mma one.
  for (const char *name : {"wgmma_m128n256", "mma_m32n128"}) {
    const int tile = cuda::TensorGemm::tile_index(name);
    if (cuda::TensorGemm::kTiles[tile].wgmma && !gemm.has_wgmma()) continue;
    check_case(env, fmt("tensor_gemm %s captured into a CUDA graph and replayed", name), [&](std::string &why) {
      const cuda::CUstream s = env.stream.get();
      const int64_t M = tile == cuda::TensorGemm::tile_index("mma_m32n128") ? 24 : 300, K = 1024, N = 520;
      auto x = rand_act(size_t(M * K), Act::BF16);
      const auto w = rand_bf16_weights(size_t(N * K));
      Dev dx = upload_act(x, Act::BF16), y = poisoned(size_t(M * N), Act::F32);
      DeviceBuffer dw = upload_raw(w);
      const cuda::TensorGemm::Choice c{tile, 3};
      CapturedGraph graph(s, [&] { gemm.run(s, dx.ptr(), M, K, dw.ptr(), N, 0, y.ptr(), Out::kF32, c); });
      bool ok = true;
      for (int replay = 0; replay < 2 && ok; ++replay) {
        x = rand_act(size_t(M * K), Act::BF16);
        const std::vector<uint8_t> xb = encode(x, Act::BF16);
        dx.buf.upload(s, xb.data(), xb.size());
        y.buf.fill_bytes(s, 0xff);
        graph.launch(s);
        env.stream.synchronize();
        bool guard = false;
        const auto got = download(y, &guard);
        ok = close(got, reference_cpu(env, x, M, K, w, N, nullptr, Out::kF32), 1e-5, guard, &why,
                   accumulation_floor(terms_rms_sampled(x, M, K, w, N), K, 1e-5));
      }
      return ok;
    });
  }

  // Operands the kernels cannot take are refused, not computed wrong.
  bool threw = false;
  try {
    gemm.run(env.stream.get(), 2, 4, 12, 0, 8, 0, 0, Out::kBf16);  // K 12 and a misaligned x
  } catch (const Error &) {
    threw = true;
  }
  record(threw, "tensor_gemm refuses K % 8 != 0 and misaligned operands");
}

}  // namespace cuda_tests
