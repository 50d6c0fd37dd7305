// CUDA op checks: cuBLASLt products (shapes, alignment, stream order, graph capture).
#include "../cuda_check.h"

namespace cuda_tests {

// ---------------------------------------------------------------------------------------------------------------
// cuBLASLt (cublaslt.h): y = x·wᵀ (+ bias) against cpu::matmul on the same bf16 values, bf16 and fp32 outputs,
// with and without the fp32 bias epilogue, odd shapes and misaligned pointers; then that it shares our context
// (its work ordered with our copies on one stream) and that a product captured into a CUDA graph replays right.

// Checks M x K x N in all four modes against one CPU reference. With `misaligned`, x and y start one element
// into their buffers (2-byte aligned), and the element before y must stay poisoned.
void test_cublaslt_shape(Env &env, cuda::CublasLt &lt, int64_t M, int64_t K, int64_t N, bool misaligned = false) {
  const int64_t off = misaligned ? 1 : 0;
  std::vector<float> x, b, ref, ref_b;
  std::vector<uint16_t> w;
  Dev dx;
  DeviceBuffer dw, db;
  try {
    x = rand_act(size_t(M * K + off), Act::BF16);
    w.resize(size_t(N * K));
    for (auto &e : w) e = to_bf16(float(uni(-1, 1)));
    b = rand_act(size_t(N), Act::F32);
    dx = upload_act(x, Act::BF16);
    dw = upload_raw(w);
    db = upload_raw(b);
    ref.resize(size_t(M * N));
    cpu::matmul(env.pool, x.data() + off, M, K, w.data(), DType::BF16, N, nullptr, ref.data());
    ref_b = ref;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) ref_b[size_t(m * N + n)] += b[size_t(n)];
  } catch (const std::exception &e) {
    record(false, fmt("cublaslt M %lld K %lld N %lld setup", (long long)M, (long long)K, (long long)N), e.what());
    return;
  }
  for (int bias = 0; bias < 2; ++bias)
    for (int y_f32 = 0; y_f32 < 2; ++y_f32)
      if (!bias || y_f32)  // cuBLASLt 13.1 has no fp32 bias for a bf16 output (CUBLAS_STATUS_INVALID_VALUE)
      check_case(env,
                 fmt("cublaslt[bf16%s] M %lld K %lld N %lld%s%s", y_f32 ? "->f32" : "", (long long)M, (long long)K,
                     (long long)N, bias ? " +bias" : "", misaligned ? " x,y misaligned" : ""),
                 [&](std::string &why) {
                   const Act yact = y_f32 ? Act::F32 : Act::BF16;
                   const CUdeviceptr es = CUdeviceptr(cuda::act_size(yact));
                   Dev y = poisoned(size_t(M * N + off), yact);
                   lt.matmul(env.stream.get(), dx.ptr() + CUdeviceptr(off * 2), M, K, dw.ptr(), N,
                             y.ptr() + CUdeviceptr(off) * es, y_f32 != 0, bias ? db.ptr() : 0);
                   env.stream.synchronize();
                   bool guard = false;
                   auto got = download(y, &guard);  // before close() reads guard
                   if (off) {
                     if (!std::isnan(got[0])) return why = "wrote the element before y", false;
                     got.erase(got.begin());
                   }
                   // fp32 output: only the summation order differs from the CPU's
                   return close(got, bias ? ref_b : ref, y_f32 ? 1e-3 : tol_for(Act::BF16), guard, &why);
                 });
}

// Captures one product (fp32 y + bias) into a CUDA graph in thread-local mode, as the engine does (an
// allocation or synchronization inside matmul would invalidate the capture), then replays it over new x
// written to the same address. warm: the shape runs once before; otherwise its first use (algorithm choice,
// cuBLASLt's kernel loading) happens inside the capture, as it can in the engine's decode graphs.
void test_cublaslt_graph(Env &env, cuda::CublasLt &lt, int64_t M, int64_t K, int64_t N, bool warm) {
  const std::string name = fmt("cublaslt captured into a CUDA graph and replayed, M %lld K %lld N %lld%s",
                               (long long)M, (long long)K, (long long)N, warm ? "" : " (first use inside the capture)");
  check_case(env, name, [&](std::string &why) {
    const cuda::CUstream s = env.stream.get();
    auto x = rand_act(size_t(M * K), Act::BF16);
    std::vector<uint16_t> w(size_t(N * K));
    for (auto &e : w) e = to_bf16(float(uni(-1, 1)));
    auto b = rand_act(size_t(N), Act::F32);
    Dev dx = upload_act(x, Act::BF16), y = poisoned(size_t(M * N), Act::F32);
    DeviceBuffer dw = upload_raw(w), db = upload_raw(b);
    if (warm) {
      lt.matmul(s, dx.ptr(), M, K, dw.ptr(), N, y.ptr(), true, db.ptr());
      env.stream.synchronize();
    }
    CapturedGraph graph(s, [&] { lt.matmul(s, dx.ptr(), M, K, dw.ptr(), N, y.ptr(), true, db.ptr()); });
    x = rand_act(size_t(M * K), Act::BF16);
    const std::vector<uint8_t> xb = encode(x, Act::BF16);
    dx.buf.upload(s, xb.data(), xb.size());
    y.buf.fill_bytes(s, 0xff);
    graph.launch(s);
    env.stream.synchronize();
    std::vector<float> ref(size_t(M * N));
    cpu::matmul(env.pool, x.data(), M, K, w.data(), DType::BF16, N, b.data(), ref.data());
    bool guard = false;
    const auto got = download(y, &guard);
    return close(got, ref, 1e-3, guard, &why);
  });
}

void test_cublaslt(Env &env) {
  const int before = g_passed + g_failed;
  const cuda::Driver &d = cuda::driver();
  cuda::CUcontext ours = nullptr, after = nullptr;
  d.cuCtxGetCurrent(&ours);
  cuda::CublasLt lt(env.ctx);
  if (!lt.available()) {
    std::printf("  cuBLASLt: skipped: %s\n", lt.reason().c_str());
    return;
  }
  d.cuCtxGetCurrent(&after);
  record(ours != nullptr && after == ours, "cuBLASLt leaves our (primary) context current");
  record(lt.reason().empty() && lt.version() >= 120000, "cuBLASLt reports its version",
         "version " + std::to_string(lt.version()));
  // Before any other product, so that cuBLASLt's first kernel loads too happen inside the capture.
  test_cublaslt_graph(env, lt, 40, 520, 200, false);

  struct Shape { int64_t M, K, N; bool big; };
  const Shape shapes[] = {{1, 64, 64, false},       {7, 136, 33, false},          {3, 67, 13, false},
                          {16, 4096, 4096, false},  {128, 4096, 12288, false},    {2048, 4096, 6144, true},
                          {300, 1024, 151936, true}, {33, 12288, 4096, false}};
  for (const Shape &sh : shapes)
    if (!g_small || !sh.big) test_cublaslt_shape(env, lt, sh.M, sh.K, sh.N);
  test_cublaslt_shape(env, lt, 5, 520, 130, true);

  bool threw = false;
  try {
    lt.matmul(env.stream.get(), 0, 4, 0, 0, 8, 0, false);
  } catch (const Error &) {
    threw = true;
  }
  record(threw, "cublaslt: K = 0 throws vt::Error");

  // One stream, no host wait in between: our copy fills x (NaN until then), cuBLASLt multiplies, our copy takes
  // y. Out of order, or in another context, the result would be NaN or garbage.
  check_case(env, "cublaslt ordered with our own work on one stream", [&](std::string &why) {
    const int64_t M = 64, K = 256, N = 96;
    auto x = rand_act(size_t(M * K), Act::BF16);
    std::vector<uint16_t> w(size_t(N * K));
    for (auto &e : w) e = to_bf16(float(uni(-1, 1)));
    Dev src = upload_act(x, Act::BF16), dx = poisoned(size_t(M * K), Act::BF16, 0);
    Dev y = poisoned(size_t(M * N), Act::BF16, 0), ycopy = poisoned(size_t(M * N), Act::BF16);
    DeviceBuffer dw = upload_raw(w);
    cuda::check(d.cuMemcpyDtoDAsync(dx.ptr(), src.ptr(), size_t(M * K * 2), env.stream.get()), "cuMemcpyDtoDAsync");
    lt.matmul(env.stream.get(), dx.ptr(), M, K, dw.ptr(), N, y.ptr(), false);
    cuda::check(d.cuMemcpyDtoDAsync(ycopy.ptr(), y.ptr(), size_t(M * N * 2), env.stream.get()), "cuMemcpyDtoDAsync");
    env.stream.synchronize();
    std::vector<float> ref(size_t(M * N));
    cpu::matmul(env.pool, x.data(), M, K, w.data(), DType::BF16, N, nullptr, ref.data());
    bool guard = false;
    const auto got = download(ycopy, &guard);
    return close(got, ref, tol_for(Act::BF16), guard, &why);
  });

  test_cublaslt_graph(env, lt, 48, 512, 200, true);
  std::printf("  cuBLASLt %lld (%s): %d checks\n", (long long)lt.version(), lt.library().c_str(),
              g_passed + g_failed - before);
}



}  // namespace cuda_tests
