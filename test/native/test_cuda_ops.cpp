// Checks every CUDA op against the CPU backend's op (the numerical reference, itself checked against float64
// in test_cpu_ops.cpp), in both activation modes: fp32 (tolerance ~1e-5) and bf16 with fp32 arithmetic
// (~1e-2). Inputs are fresh random values every run (seed printed; VT_TEST_SEED=n replays one); in bf16 mode
// they are drawn already rounded to bf16, so both sides compute on the same values and only the GPU's
// arithmetic and output rounding differ. Outputs are NaN-poisoned (0xff bytes) before each op, with a
// poisoned guard past the end, so an element the op forgot, or one it wrote out of bounds, fails the check.
// Paged attention runs ragged batches over shuffled block tables, positions on and around block boundaries,
// prefill rows and a long context, with every cache slot the batch must not read poisoned too.
//
// Prints one line per check that fails and ends with "N passed, N failed"; exits non-zero on any failure.
// VT_TEST_SMALL=1 leaves out the long contexts and the largest shapes (for runs under compute-sanitizer);
// VT_TEST_ONLY=text runs only the cases whose name contains it.
// Without a usable GPU (no driver, no device, or a build without kernels) it prints "skipped: <reason>" and
// exits 0, which is what CI sees.
//
// The checks live by op family in test/native/cuda_ops/*.cpp (linked into this program), the shared harness in
// cuda_check.h; this file holds the driver checks and main().
#include "cuda_check.h"

namespace cuda_tests {

// ---------------------------------------------------------------------------------------------------------------
void test_driver(Env &env) {
  const auto a = cuda::cuda_available();
  record(a.ok && a.reason.empty() && a.driver_version >= cuda::kMinDriverVersion && a.device_count > 0,
         "cuda_available reports a usable device");
  bool threw = false;
  try {
    env.ctx.function("vt_no_such_kernel");
  } catch (const Error &e) {
    threw = std::string(e.what()).find("vt_no_such_kernel") != std::string::npos;
  }
  record(threw, "a missing kernel name throws vt::Error naming it");
  vt_status st = VT_OK;
  std::string msg;
  try {
    DeviceBuffer huge(size_t(1) << 52);  // 4 PiB
  } catch (const Error &e) {
    st = e.status(), msg = e.what();
  }
  record(st == VT_ERR_OUT_OF_MEMORY && msg.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos,
         "an impossible allocation is VT_ERR_OUT_OF_MEMORY with the driver's text", msg);
  check_case(env, "events time a device copy", [&](std::string &why) {
    DeviceBuffer a1(64 << 20), b1(64 << 20);
    a1.fill_bytes(env.stream.get(), 1);
    cuda::Event e0, e1;
    e0.record(env.stream.get());
    cuda::check(cuda::driver().cuMemcpyDtoDAsync(b1.ptr(), a1.ptr(), a1.bytes(), env.stream.get()), "cuMemcpyDtoDAsync");
    e1.record(env.stream.get());
    const float ms = cuda::Event::elapsed_ms(e0, e1);
    why = fmt("elapsed %g ms", double(ms));
    return ms > 0 && ms < 1000;
  });
  // StagedUpload (the weights' upload at load): pieces of odd sizes at odd device offsets, the largest spanning
  // more than all the staging slots, arrive bit for bit; and copy() has read its source when it returns (each
  // piece is overwritten right after, as the loader gives the mapped pages back).
  check_case(env, "StagedUpload: odd-sized pieces through the pinned slots arrive exactly", [&](std::string &why) {
    const size_t slot = cuda::StagedUpload::kSlotBytes, total = slot * (cuda::StagedUpload::kSlots + 1) + 4099;
    std::vector<uint8_t> src(total), want;
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto &b : src) b = uint8_t(byte(g_rng));
    want = src;
    DeviceBuffer dst(total + 1);
    {
      cuda::StagedUpload up(env.stream.get());
      const size_t cuts[] = {0, 7, 7, slot + 3, total};  // (one empty piece)
      for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
        up.copy(dst.ptr() + 1 + cuts[i], src.data() + cuts[i], cuts[i + 1] - cuts[i]);
        std::fill(src.begin() + long(cuts[i]), src.begin() + long(cuts[i + 1]), uint8_t(0));
      }
      up.finish();
    }
    std::vector<uint8_t> got(total);
    dst.download(env.stream.get(), got.data(), total, 1);
    const auto bad = std::mismatch(got.begin(), got.end(), want.begin());
    if (bad.first == got.end()) return true;
    why = fmt("byte %zu of %zu differs", size_t(bad.first - got.begin()), total);
    return false;
  });
}



}  // namespace cuda_tests

using namespace cuda_tests;

int main() {
  const auto avail = cuda::cuda_available();
  if (!avail.ok) {
    std::printf("skipped: %s\n0 passed, 0 failed\n", avail.reason.c_str());
    return 0;
  }
  uint64_t seed = std::random_device{}();
  if (const char *s = std::getenv("VT_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  g_rng.seed(seed);
  g_small = std::getenv("VT_TEST_SMALL") != nullptr;
  g_only = std::getenv("VT_TEST_ONLY");
  try {
    cuda::Context ctx;
    cuda::Stream stream;
    cpu::ThreadPool pool(int(std::max(1u, std::thread::hardware_concurrency())));
    std::printf("test_cuda_ops: %s, compute capability %d.%d, %d SMs, driver %d, seed %llu\n", ctx.name().c_str(),
                ctx.compute_capability() / 10, ctx.compute_capability() % 10, ctx.sm_count(), avail.driver_version,
                (unsigned long long)seed);
    Env env{ctx, stream, pool};
    g_stream = stream.get();
    test_driver(env);
    test_cublaslt(env);
    test_tensor_gemm(env);
    for (Act act : {Act::F32, Act::BF16}) {
      cuda::Ops ops(ctx, act);
      const int before = g_passed + g_failed;
      test_embed(env, ops);
      test_norms(env, ops);
      test_rope(env, ops);
      test_silu_mul(env, ops);
      test_gemv(env, ops);
      test_gemv_decode_shapes(env, ops);
      test_gemv_swiglu(env, ops);
      test_gemv_fused(env, ops);
      test_gemv_norm_head(env, ops);
      test_embed_norm(env, ops);
      test_gemv_early(env, ops);
      test_kv_store(env, ops);
      test_rope_store(env, ops);
      test_attention_gate(env, ops);
      test_f16_to_bf16(env, ops);
      test_gemv_norm_rope(env, ops);
      if (act == Act::F32) test_argmax(env, ops);  // fp32 logits whatever the activations
      if (act == Act::F32) test_sample(env, ops);
      if (act == Act::F32) test_penalties(env, ops);
      if (act == Act::F32) test_top_logprobs(env, ops);
      test_attention(env, ops);
      test_attention_decode(env, ops);
      test_rope_then_attention(env, ops);
      test_attention_prefill(env, ops);
      test_gated_delta(env, ops);
      std::printf("  %s activations: %d checks\n", cuda::act_name(act), g_passed + g_failed - before);
    }
  } catch (const std::exception &e) {
    record(false, "setup", e.what());
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
