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
// VT_TEST_SMALL=1 leaves out the long contexts and the largest shapes (for runs under compute-sanitizer).
// Without a usable GPU (no driver, no device, or a build without kernels) it prints "skipped: <reason>" and
// exits 0, which is what CI sees.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_ops.h"
#include "logits_processors.h"
#include "sampling.h"
#include "status.h"

using namespace vt;
using vt::cuda::Act;
using vt::cuda::CUdeviceptr;
using vt::cuda::DeviceBuffer;

namespace {

cuda::CUstream g_stream = nullptr;  // every copy, fill and kernel of the checks runs on this one stream
bool g_small = false;  // VT_TEST_SMALL: skip the big cases


uint16_t to_bf16(float f) {  // round to nearest even, as the kernels do
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// Random activations, representable in the mode's type (so the CPU sees exactly what the GPU sees).
std::vector<float> rand_act(size_t n, Act act, double lo = -1, double hi = 1) {
  std::vector<float> v(n);
  for (auto &x : v) {
    x = float(uni(lo, hi));
    if (act == Act::BF16) x = bf16_to_f32(to_bf16(x));
  }
  return v;
}

std::vector<uint8_t> encode(const std::vector<float> &v, Act act) {
  std::vector<uint8_t> b(v.size() * cuda::act_size(act));
  if (act == Act::F32) {
    std::memcpy(b.data(), v.data(), b.size());
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = to_bf16(v[i]);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  return b;
}

// A device buffer holding `v` in the activation type, or poisoned (0xff: NaN in fp32 and bf16) with `guard`
// poisoned elements past the end.
struct Dev {
  DeviceBuffer buf;
  size_t n = 0, guard = 0;
  Act act = Act::F32;
  CUdeviceptr ptr() const { return buf.ptr(); }
};

Dev upload_act(const std::vector<float> &v, Act act, size_t guard = 0) {
  Dev d{DeviceBuffer((v.size() + guard) * cuda::act_size(act)), v.size(), guard, act};
  std::vector<uint8_t> b = encode(v, act);
  b.resize((v.size() + guard) * cuda::act_size(act), 0xff);
  d.buf.upload(g_stream, b.data(), b.size());
  return d;
}
Dev poisoned(size_t n, Act act, size_t guard = 64) {
  Dev d{DeviceBuffer((n + guard) * cuda::act_size(act)), n, guard, act};
  d.buf.fill_bytes(g_stream, 0xff);
  return d;
}
template <class T>
DeviceBuffer upload_raw(const std::vector<T> &v) {
  DeviceBuffer b(std::max<size_t>(1, v.size()) * sizeof(T));
  b.upload(g_stream, v.data(), v.size() * sizeof(T));
  return b;
}

// Reads back d's n elements as fp32; *guard_ok tells whether the guard is still all 0xff.
std::vector<float> download(const Dev &d, bool *guard_ok = nullptr) {
  const size_t es = cuda::act_size(d.act);
  std::vector<uint8_t> b((d.n + d.guard) * es);
  d.buf.download(g_stream, b.data(), b.size());
  if (guard_ok) *guard_ok = std::all_of(b.begin() + long(d.n * es), b.end(), [](uint8_t x) { return x == 0xff; });
  std::vector<float> v(d.n);
  for (size_t i = 0; i < d.n; ++i) {
    if (d.act == Act::F32) {
      std::memcpy(&v[i], &b[i * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      v[i] = bf16_to_f32(h);
    }
  }
  return v;
}

// |got - ref| <= tol * (|ref| + max(rms(ref), scale_floor)) for every element, nothing NaN, guard intact. The
// rms term keeps an element that cancels to near zero from being held to an impossible relative bound;
// scale_floor is the magnitude of what was summed where that exceeds the result's (attention over long contexts
// averages values of magnitude ~1 into results of magnitude ~1/sqrt(keys)).
bool close(const std::vector<float> &got, const std::vector<float> &ref, double tol, bool guard_ok, std::string *why,
           double scale_floor = 0) {
  if (!guard_ok) {
    *why = "wrote past the end of the output";
    return false;
  }
  if (got.size() != ref.size()) {
    *why = "size mismatch";
    return false;
  }
  double ss = 0;
  for (float r : ref) ss += double(r) * r;
  const double rms = std::max(scale_floor, ref.empty() ? 0 : std::sqrt(ss / double(ref.size())));
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i])) {
      *why = "element " + std::to_string(i) + (std::isnan(got[i]) ? " not written (NaN)" : " should be NaN");
      return false;
    }
    const double err = std::fabs(double(got[i]) - ref[i]), bound = tol * (std::fabs(ref[i]) + rms);
    const double r = err == 0 ? 0 : bound == 0 ? INFINITY : err / bound;
    if (r > worst_ratio) worst_ratio = r, worst = i;
  }
  if (worst_ratio <= 1) return true;
  char buf[200];
  std::snprintf(buf, sizeof buf, "element %zu: got %.9g want %.9g (error %.3g x the bound, tol %.0e)", worst,
                double(got[worst]), double(ref[worst]), worst_ratio, tol);
  *why = buf;
  return false;
}

double tol_for(Act act) { return act == Act::F32 ? 1e-5 : 1e-2; }

struct Env {
  cuda::Context &ctx;
  cuda::Stream &stream;
  cpu::ThreadPool &pool;
};

// Runs one check: the body returns true when it passed (filling *why otherwise); CUDA errors fail it.
template <class F>
void check_case(Env &env, const std::string &name, F body) {
  std::string why;
  bool ok = false;
  try {
    env.ctx.synchronize();  // nothing of an earlier check may still run
    ok = body(why);
    env.stream.synchronize();
    env.ctx.synchronize();
  } catch (const std::exception &e) {
    ok = false;
    why = std::string("threw: ") + e.what();
  }
  record(ok, name, why);
}

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...) {
  char buf[300];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

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
}


void test_embed(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t dim : {1, 7, 64, 1000, 4096})
      for (int64_t T : {1, 5, 33}) {
        const int64_t vocab = 50 + below(1000);
        std::vector<uint8_t> table(size_t(vocab * dim) * dtype_size(dt));
        for (size_t i = 0; i < table.size() / dtype_size(dt); ++i) {
          const float f = float(uni(-2, 2));
          if (dt == DType::F32) std::memcpy(&table[i * 4], &f, 4);
          else {
            // f16: any finite value, subnormals included
            uint16_t h = dt == DType::BF16 ? to_bf16(f) : uint16_t(below(2) << 15 | below(31) << 10 | below(1024));
            std::memcpy(&table[i * 2], &h, 2);
          }
        }
        std::vector<int32_t> ids(static_cast<size_t>(T));
        for (auto &id : ids) id = int32_t(below(vocab));
        check_case(env, fmt("embed[%s] table %s dim %lld T %lld", cuda::act_name(act), dtype_name(dt), (long long)dim,
                            (long long)T),
                   [&](std::string &why) {
                     DeviceBuffer dtable = upload_raw(table), dids = upload_raw(ids);
                     Dev out = poisoned(size_t(T * dim), act);
                     ops.embed(env.stream.get(), dtable.ptr(), dt, dim, dids.ptr(), T, out.ptr());
                     env.stream.synchronize();
                     std::vector<float> ref(size_t(T * dim));
                     cpu::embed(table.data(), dt, dim, ids.data(), T, ref.data());
                     bool guard = false;
                     auto got = download(out, &guard);
                     // fp32 activations copy exactly; bf16 ones round once (exact for a bf16 table)
                     return close(got, ref, act == Act::F32 || dt == DType::BF16 ? 0 : 4e-3, guard, &why);
                   });
      }
}

std::vector<float> rand_weight(size_t n) {
  std::vector<float> w(n);
  for (auto &x : w) x = float(uni(0.5, 1.5));
  return w;
}

void test_norms(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const float eps = 1e-6f;
  for (int64_t dim : {1, 7, 64, 1000, 4096, 5120})
    for (int64_t rows : {1, 3, 17}) {
      const size_t n = size_t(rows * dim);
      check_case(env, fmt("rmsnorm[%s] rows %lld dim %lld", cuda::act_name(act), (long long)rows, (long long)dim),
                 [&](std::string &why) {
                   auto x = rand_act(n, act, -3, 3);
                   auto w = rand_weight(size_t(dim));
                   Dev dx = upload_act(x, act);
                   DeviceBuffer dw = upload_raw(w);
                   Dev out = poisoned(n, act);
                   ops.rmsnorm(env.stream.get(), dx.ptr(), rows, dim, dw.ptr(), eps, out.ptr());
                   ops.rmsnorm(env.stream.get(), dx.ptr(), rows, dim, dw.ptr(), eps, dx.ptr());  // in place
                   env.stream.synchronize();
                   auto ref = x;
                   cpu::rmsnorm(env.pool, ref.data(), rows, dim, w.data(), eps);
                   bool guard = false;
                   auto got = download(out, &guard);
                   if (!close(got, ref, tol_for(act), guard, &why)) return false;
                   if (!close(download(dx), ref, tol_for(act), true, &why)) return why = "in place: " + why, false;
                   return true;
                 });
      check_case(env, fmt("add_rmsnorm[%s] rows %lld dim %lld", cuda::act_name(act), (long long)rows, (long long)dim),
                 [&](std::string &why) {
                   auto res = rand_act(n, act, -3, 3), x = rand_act(n, act, -1, 1);
                   auto w = rand_weight(size_t(dim));
                   Dev dres = upload_act(res, act, 64), dx = upload_act(x, act);
                   DeviceBuffer dw = upload_raw(w);
                   Dev out = poisoned(n, act);
                   ops.add_rmsnorm(env.stream.get(), dres.ptr(), dx.ptr(), rows, dim, dw.ptr(), eps, out.ptr());
                   env.stream.synchronize();
                   std::vector<float> ref(n);
                   cpu::add_rmsnorm(env.pool, res.data(), x.data(), rows, dim, w.data(), eps, ref.data());
                   bool guard = false, rguard = false;
                   auto got_res = download(dres, &rguard);
                   // bf16: the residual is rounded to bf16 once (2^-9) and the norm reads that rounded value
                   if (!close(got_res, res, act == Act::F32 ? 1e-6 : 4e-3, rguard, &why)) return why = "residual: " + why, false;
                   const auto got = download(out, &guard);  // before close() reads guard
                   return close(got, ref, tol_for(act), guard, &why);
                 });
    }
}

std::vector<float> inv_freq_table(int head_dim, double theta) {
  std::vector<float> f(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) f[size_t(i)] = float(1.0 / std::pow(theta, 2.0 * i / head_dim));
  return f;
}

void test_rope(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  struct Shape { int64_t T; int32_t heads, hd; };
  const Shape shapes[] = {{1, 1, 2}, {5, 3, 6}, {1, 32, 128}, {7, 8, 128}, {19, 4, 64}, {3, 2, 256}, {4, 5, 80}};
  for (const Shape &sh : shapes)
    for (int norm = 0; norm < 2; ++norm)
      for (float attn_scale : {1.0f, 1.2f}) {
        if (attn_scale != 1.0f && norm) continue;
        // fused layout: the heads sit inside wider rows (as q inside a qkv buffer); the rest must be untouched
        for (int fused = 0; fused < 2; ++fused) {
          const int64_t width = int64_t(sh.heads) * sh.hd, stride = fused ? width + 2 * sh.hd + 4 : width;
          check_case(env,
                     fmt("rope[%s] T %lld heads %d head_dim %d%s%s%s", cuda::act_name(act), (long long)sh.T, sh.heads,
                         sh.hd, norm ? " +qk_norm" : "", attn_scale != 1.0f ? " attn_scale 1.2" : "",
                         fused ? " strided rows" : ""),
                     [&](std::string &why) {
                       auto buf = rand_act(size_t(sh.T * stride), act, -2, 2);
                       std::vector<int32_t> pos(static_cast<size_t>(sh.T));
                       for (auto &p : pos) p = int32_t(below(4) == 0 ? below(40000) : below(64));
                       auto inv_freq = inv_freq_table(sh.hd, 1e6);
                       auto w = rand_weight(size_t(sh.hd));
                       Dev dx = upload_act(buf, act, 64);
                       DeviceBuffer dpos = upload_raw(pos), dfreq = upload_raw(inv_freq), dw = upload_raw(w);
                       ops.rope(env.stream.get(), dx.ptr(), sh.T, sh.heads, sh.hd, stride, dpos.ptr(), dfreq.ptr(),
                                attn_scale, norm ? dw.ptr() : 0, 1e-6f);
                       env.stream.synchronize();
                       // reference on the contiguous heads, then scattered back into the wide rows
                       std::vector<float> heads(size_t(sh.T * width));
                       for (int64_t t = 0; t < sh.T; ++t)
                         std::copy_n(buf.begin() + t * stride, width, heads.begin() + t * width);
                       if (norm) cpu::rmsnorm(env.pool, heads.data(), sh.T * sh.heads, sh.hd, w.data(), 1e-6f);
                       cpu::rope(env.pool, heads.data(), sh.T, sh.heads, sh.hd, pos.data(), inv_freq.data(), attn_scale);
                       auto ref = buf;
                       for (int64_t t = 0; t < sh.T; ++t)
                         std::copy_n(heads.begin() + t * width, width, ref.begin() + t * stride);
                       bool guard = false;
                       const auto got = download(dx, &guard);  // before close() reads guard
                       return close(got, ref, tol_for(act), guard, &why);
                     });
        }
      }
}

void test_silu_mul(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  for (int64_t F : {1, 7, 3072, 12289})
    for (int64_t T : {1, 4, 13})
      for (int fused = 0; fused < 2; ++fused)
        check_case(env, fmt("silu_mul[%s] T %lld F %lld%s", cuda::act_name(act), (long long)T, (long long)F,
                            fused ? " gate_up fused" : ""),
                   [&](std::string &why) {
                     const int64_t ld = fused ? 2 * F : F;
                     auto g = rand_act(size_t(T * ld), act, -6, 6), u = rand_act(size_t(T * ld), act, -2, 2);
                     if (fused)  // one (T, 2F) buffer: gate = [:, :F], up = [:, F:]
                       for (int64_t t = 0; t < T; ++t) std::copy_n(u.begin() + t * ld, F, g.begin() + t * ld + F);
                     Dev dg = upload_act(g, act), du = upload_act(u, act);
                     Dev out = poisoned(size_t(T * F), act);
                     const size_t es = cuda::act_size(act);
                     const CUdeviceptr up = fused ? dg.ptr() + CUdeviceptr(F * es) : du.ptr();
                     ops.silu_mul(env.stream.get(), dg.ptr(), up, T, F, ld, out.ptr());
                     env.stream.synchronize();
                     std::vector<float> ref(size_t(T * F));
                     if (fused) {
                       cpu::silu_mul(env.pool, g.data(), g.data() + F, T, F, ref.data());
                     } else {
                       cpu::silu_mul(env.pool, g.data(), u.data(), T, F, ref.data());
                     }
                     bool guard = false;
                     const auto got = download(out, &guard);  // before close() reads guard
                     return close(got, ref, tol_for(act), guard, &why);
                   });
}

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
                       return close(got, ref, tol_for(yact), guard, &why);
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
                   bool guard = false;
                   const auto got = download(y, &guard);  // before close() reads guard
                   if (!close(got, ref, tol_for(act), guard, &why)) return false;

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

void test_kv_store(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  for (int32_t n_kv : {1, 8})
    for (int32_t hd : {64, 72})
      check_case(env, fmt("kv_store[%s] kv_heads %d head_dim %d", cuda::act_name(act), n_kv, hd), [&](std::string &why) {
        const int64_t T = 37, n_slots = 4 * 16, row = int64_t(n_kv) * hd;
        auto k = rand_act(size_t(T * row), act), v = rand_act(size_t(T * row), act);
        std::vector<int32_t> perm(static_cast<size_t>(n_slots));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), g_rng);
        std::vector<int32_t> slot(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) slot[size_t(t)] = t % 5 == 3 ? -1 : perm[size_t(t)];  // some padding rows
        Dev dk = upload_act(k, act), dv = upload_act(v, act);
        Dev kc = poisoned(size_t(n_slots * row), act, 0), vc = poisoned(size_t(n_slots * row), act, 0);
        DeviceBuffer dslot = upload_raw(slot);
        ops.kv_store(env.stream.get(), dk.ptr(), dv.ptr(), T, n_kv, hd, dslot.ptr(), kc.ptr(), vc.ptr());
        env.stream.synchronize();
        std::vector<float> kref(size_t(n_slots * row), NAN), vref = kref;
        cpu::kv_store(k.data(), v.data(), T, n_kv, hd, slot.data(), kref.data(), vref.data());
        if (!close(download(kc), kref, 0, true, &why)) return why = "k: " + why, false;
        return close(download(vc), vref, 0, true, &why);
      });
}

// The cache rows named by slot[] (each row_elems wide) against ref within tol; every other row and the guard
// must still hold the poison bytes (0xff) they started with.
bool check_cache(const Dev &c, const std::vector<float> &ref, const std::vector<int32_t> &slot, int64_t row_elems,
                 double tol, std::string *why) {
  const size_t es = cuda::act_size(c.act), rows = c.n / size_t(row_elems), row_bytes = size_t(row_elems) * es;
  std::vector<uint8_t> raw((c.n + c.guard) * es);
  c.buf.download(g_stream, raw.data(), raw.size());
  std::vector<char> written(rows, 0);
  for (int32_t s : slot)
    if (s >= 0) written[size_t(s)] = 1;
  auto poisoned_at = [&](size_t from, size_t to) {
    return std::all_of(raw.begin() + long(from), raw.begin() + long(to), [](uint8_t b) { return b == 0xff; });
  };
  bool guard = poisoned_at(rows * row_bytes, raw.size());
  for (size_t r = 0; r < rows; ++r)
    if (!written[r] && !poisoned_at(r * row_bytes, (r + 1) * row_bytes)) {
      *why = "cache row " + std::to_string(r) + " was not in slot[] but was written";
      return false;
    }
  const std::vector<float> all = download(c);
  std::vector<float> got, want;
  for (size_t r = 0; r < rows; ++r)
    if (written[r]) {
      got.insert(got.end(), all.begin() + long(r * size_t(row_elems)), all.begin() + long((r + 1) * size_t(row_elems)));
      want.insert(want.end(), ref.begin() + long(r * size_t(row_elems)), ref.begin() + long((r + 1) * size_t(row_elems)));
    }
  return close(got, want, tol, guard, why);
}

// rope_store on a fused qkv(T, (heads + 2 kv) * head_dim) against the three ops it replaces: on the CPU (the
// Qwen3 norms, cpu::rope on the q and on the k heads, cpu::kv_store), within the mode's tolerance; and on the
// GPU (rope on the q heads, rope on the k heads, the cache rows then being those k and v), bit for bit, as both
// share rope_head(). Positions up to ~33,000, random cache slots among spares, padding tokens (slot -1) whose
// rows must stay unwritten like every other spare row of the poisoned caches.
void test_rope_store(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const size_t es = cuda::act_size(act);
  struct Shape { int32_t heads, kv, hd; };
  const Shape shapes[] = {{16, 8, 64}, {16, 8, 128}, {32, 8, 64}, {32, 8, 128}, {4, 4, 64},
                          {4, 4, 128}, {5, 1, 80},   {6, 2, 256}, {3, 1, 6}};
  const float eps = 1e-6f;
  for (const Shape &sh : shapes)
    for (int64_t T : {1, 7, 300})
      for (int norm = 0; norm < 2; ++norm) {
        if (g_small && T > 7) continue;
        const float attn_scale = T == 7 ? 1.2f : 1.0f;
        const bool pad_single = T == 1 && norm && sh.kv == 8;  // a lone padding token stores nothing
        check_case(
            env,
            fmt("rope_store[%s] T %lld heads %d kv_heads %d head_dim %d%s%s%s", cuda::act_name(act), (long long)T,
                sh.heads, sh.kv, sh.hd, norm ? " +qk_norm" : "", attn_scale != 1.0f ? " attn_scale 1.2" : "",
                pad_single ? " padding" : ""),
            [&](std::string &why) {
              const int64_t width = int64_t(sh.heads + 2 * sh.kv) * sh.hd, qw = int64_t(sh.heads) * sh.hd,
                            kvw = int64_t(sh.kv) * sh.hd, n_slots = T + T / 2 + 8;
              auto qkv = rand_act(size_t(T * width), act, -2, 2);
              std::vector<int32_t> perm(static_cast<size_t>(n_slots)), pos(static_cast<size_t>(T)),
                  slot(static_cast<size_t>(T));
              std::iota(perm.begin(), perm.end(), 0);
              std::shuffle(perm.begin(), perm.end(), g_rng);
              for (int64_t t = 0; t < T; ++t) {
                pos[size_t(t)] = int32_t(below(2) ? 28000 + below(5000) : below(64));
                slot[size_t(t)] = below(4) == 0 ? -1 : perm[size_t(t)];
              }
              if (T > 1) slot[size_t(T / 2)] = -1;
              if (T == 1) slot[0] = pad_single ? -1 : perm[0];
              auto inv_freq = inv_freq_table(sh.hd, 1e6);
              auto qn = rand_weight(size_t(sh.hd)), kn = rand_weight(size_t(sh.hd));
              Dev dqkv = upload_act(qkv, act, 64), gqkv = upload_act(qkv, act, 64);
              Dev kc = poisoned(size_t(n_slots * kvw), act), vc = poisoned(size_t(n_slots * kvw), act);
              DeviceBuffer dpos = upload_raw(pos), dslot = upload_raw(slot), dfreq = upload_raw(inv_freq),
                           dqn = upload_raw(qn), dkn = upload_raw(kn);
              const CUdeviceptr qnp = norm ? dqn.ptr() : 0, knp = norm ? dkn.ptr() : 0;
              ops.rope_store(env.stream.get(), dqkv.ptr(), T, sh.heads, sh.kv, sh.hd, dpos.ptr(), dfreq.ptr(),
                             attn_scale, qnp, knp, eps, dslot.ptr(), kc.ptr(), vc.ptr());
              ops.rope(env.stream.get(), gqkv.ptr(), T, sh.heads, sh.hd, width, dpos.ptr(), dfreq.ptr(), attn_scale,
                       qnp, eps);
              ops.rope(env.stream.get(), gqkv.ptr() + CUdeviceptr(qw * int64_t(es)), T, sh.kv, sh.hd, width,
                       dpos.ptr(), dfreq.ptr(), attn_scale, knp, eps);
              env.stream.synchronize();

              // the CPU's three ops on the q, k and v parts taken apart, then put back together
              std::vector<float> q(size_t(T * qw)), k(size_t(T * kvw)), v(size_t(T * kvw));
              for (int64_t t = 0; t < T; ++t) {
                const auto r = qkv.begin() + t * width;
                std::copy_n(r, qw, q.begin() + t * qw);
                std::copy_n(r + qw, kvw, k.begin() + t * kvw);
                std::copy_n(r + qw + kvw, kvw, v.begin() + t * kvw);
              }
              if (norm) {
                cpu::rmsnorm(env.pool, q.data(), T * sh.heads, sh.hd, qn.data(), eps);
                cpu::rmsnorm(env.pool, k.data(), T * sh.kv, sh.hd, kn.data(), eps);
              }
              cpu::rope(env.pool, q.data(), T, sh.heads, sh.hd, pos.data(), inv_freq.data(), attn_scale);
              cpu::rope(env.pool, k.data(), T, sh.kv, sh.hd, pos.data(), inv_freq.data(), attn_scale);
              auto ref = qkv;
              for (int64_t t = 0; t < T; ++t) {
                std::copy_n(q.begin() + t * qw, qw, ref.begin() + t * width);
                std::copy_n(k.begin() + t * kvw, kvw, ref.begin() + t * width + qw);
              }
              std::vector<float> kref(size_t(n_slots * kvw), NAN), vref = kref;
              cpu::kv_store(k.data(), v.data(), T, sh.kv, sh.hd, slot.data(), kref.data(), vref.data());
              bool guard = false;
              const auto got = download(dqkv, &guard);  // before close() reads guard
              if (!close(got, ref, tol_for(act), guard, &why)) return why = "qkv vs CPU: " + why, false;
              if (!check_cache(kc, kref, slot, kvw, tol_for(act), &why)) return why = "k cache vs CPU: " + why, false;
              if (!check_cache(vc, vref, slot, kvw, 0, &why)) return why = "v cache vs CPU: " + why, false;

              // the GPU's rope + rope + kv_store: the same bits
              const auto gref = download(gqkv);
              if (!close(got, gref, 0, true, &why)) return why = "qkv vs GPU rope: " + why, false;
              std::vector<float> gk(size_t(T * kvw)), gv(size_t(T * kvw));
              for (int64_t t = 0; t < T; ++t) {
                std::copy_n(gref.begin() + t * width + qw, kvw, gk.begin() + t * kvw);
                std::copy_n(gref.begin() + t * width + qw + kvw, kvw, gv.begin() + t * kvw);
              }
              std::vector<float> gkc(size_t(n_slots * kvw), NAN), gvc = gkc;
              cpu::kv_store(gk.data(), gv.data(), T, sh.kv, sh.hd, slot.data(), gkc.data(), gvc.data());
              if (!check_cache(kc, gkc, slot, kvw, 0, &why)) return why = "k cache vs GPU rope: " + why, false;
              return true;
            });
      }
}

// One row of logits of the given kind (0-7), the cases greedy sampling must get right: flat and wide
// values, exact ties (among many equal integers, planted at random ids, at neighbours and at the last id), -inf
// entries, NaN entries (never the max, no probability), rows of only -inf and NaN, +inf entries, one
// dominant value.
void fill_logits_row(float *x, int32_t vocab, int kind) {
  const float inf = INFINITY;
  for (int32_t i = 0; i < vocab; ++i) {
    switch (kind) {
      case 0: x[i] = float(uni(-1, 1)); break;
      case 1: x[i] = float(uni(-30, 30)); break;
      case 2: x[i] = float(below(17) - 8); break;
      case 5: x[i] = below(8) == 0 ? NAN : -inf; break;
      default: x[i] = float(uni(-5, 5));
    }
    if ((kind == 3 || kind == 6) && below(10) == 0) x[i] = -inf;
    if ((kind == 4 || kind == 6) && below(10) == 0) x[i] = NAN;
  }
  auto plant = [&](float value) {  // the same value at several ids, the lowest of which must win
    for (int32_t id : {int32_t(below(vocab)), int32_t(below(vocab)), vocab - 1}) {
      x[id] = value;
      if (id + 1 < vocab) x[id + 1] = value;
    }
  };
  if (kind == 3 || kind == 4) plant(7.5f);
  if (kind == 4) x[0] = NAN;
  if (kind == 6) plant(inf);
  if (kind == 7) x[below(vocab)] = 40.f;
}

struct Greedy {
  int32_t id;
  double logprob;
};

// The sampler's greedy rules, in double: the first largest value (NaN never wins); only -inf/NaN: id 0 and
// all tie; +inf entries share all the probability; otherwise -log(sum over non-NaN of exp(x - max)).
Greedy greedy_ref(const float *x, int32_t vocab) {
  float m = -INFINITY;
  int32_t id = 0;
  for (int32_t i = 0; i < vocab; ++i)
    if (x[i] > m) m = x[i], id = i;
  if (m == -INFINITY) return {0, -std::log(double(vocab))};
  double s = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    if (m == INFINITY) s += x[i] == INFINITY ? 1 : 0;
    else if (!std::isnan(x[i])) s += std::exp(double(x[i]) - double(m));
  }
  return {id, -std::log(s)};
}

// argmax + logprob per row against greedy_ref and against the CPU sampler itself (vt::sample, temperature 0,
// one logprob), within 1e-5. Rows ld elements apart, the gap and a tail past the last row filled with 1e30
// (it wins if read); variants take the 16-byte path (row starts aligned) and the scalar one (ld % 4 != 0, or
// the logits one element into the buffer). Outputs poisoned, with a guard.
void test_argmax(Env &env, cuda::Ops &ops) {
  struct Variant { int32_t ld_extra, offset; };
  const Variant variants[] = {{0, 0}, {3, 0}, {4, 0}, {64, 1}};
  SamplerScratch scratch;
  Rng rng(1);
  SamplingParams greedy;
  greedy.logprobs = 1;
  for (int32_t vocab : {151936, 1000, 33})
    for (int64_t n : {1, 5, 128})
      for (const Variant &var : variants) {
        if (g_small && vocab * n > 1000000) continue;
        const int64_t ld = vocab + var.ld_extra;
        check_case(env,
                   fmt("argmax n %lld vocab %d ld %lld%s", (long long)n, vocab, (long long)ld,
                       var.offset ? " (logits misaligned)" : ""),
                   [&](std::string &why) {
                     const int kind0 = int(below(8));  // rows cycle through the kinds from a random start
                     std::vector<float> host(size_t(var.offset + n * ld + 64), 1e30f);
                     float *rows = host.data() + var.offset;
                     for (int64_t r = 0; r < n; ++r) fill_logits_row(rows + r * ld, vocab, int((kind0 + r) % 8));
                     DeviceBuffer dl = upload_raw(host);
                     const size_t guard = 16;
                     DeviceBuffer ids(size_t(n + guard) * 4), lps(size_t(n + guard) * 4);
                     ids.fill_bytes(env.stream.get(), 0xff);
                     lps.fill_bytes(env.stream.get(), 0xff);
                     ops.argmax(env.stream.get(), dl.ptr() + CUdeviceptr(var.offset * 4), n, vocab, ld, ids.ptr(),
                                lps.ptr());
                     env.stream.synchronize();
                     std::vector<int32_t> got_id(size_t(n + guard));
                     std::vector<float> got_lp(size_t(n + guard));
                     ids.download(env.stream.get(), got_id.data(), ids.bytes());
                     lps.download(env.stream.get(), got_lp.data(), lps.bytes());
                     for (size_t i = size_t(n); i < size_t(n + guard); ++i) {
                       uint32_t bits;
                       std::memcpy(&bits, &got_lp[i], 4);
                       if (got_id[i] != -1 || bits != 0xffffffffu) return why = "wrote past the end of the output", false;
                     }
                     for (int64_t r = 0; r < n; ++r) {
                       const float *x = rows + r * ld;
                       const Greedy ref = greedy_ref(x, vocab);
                       const SampleResult cpu = sample(x, vocab, greedy, rng, scratch);
                       const int32_t id = got_id[size_t(r)];
                       const float lp = got_lp[size_t(r)];
                       const int kind = int((kind0 + r) % 8);
                       if (id != ref.id || id != cpu.token) {
                         why = fmt("row %lld (kind %d): id %d, want %d (CPU sampler %d)", (long long)r, kind, id, ref.id,
                                   cpu.token);
                         return false;
                       }
                       if (!(std::fabs(lp - ref.logprob) <= 1e-5 && std::fabs(lp - double(cpu.logprob)) <= 1e-5)) {
                         why = fmt("row %lld (kind %d): logprob %.9g, want %.9g (CPU sampler %.9g)", (long long)r, kind,
                                   double(lp), ref.logprob, double(cpu.logprob));
                         return false;
                       }
                     }
                     // without logprobs (out_logprobs 0): the same ids
                     ids.fill_bytes(env.stream.get(), 0xff);
                     ops.argmax(env.stream.get(), dl.ptr() + CUdeviceptr(var.offset * 4), n, vocab, ld, ids.ptr(), 0);
                     env.stream.synchronize();
                     std::vector<int32_t> again(size_t(n + guard));
                     ids.download(env.stream.get(), again.data(), ids.bytes());
                     for (int64_t r = 0; r < n; ++r)
                       if (again[size_t(r)] != got_id[size_t(r)])
                         return why = fmt("row %lld: id %d without logprobs, %d with", (long long)r, again[size_t(r)],
                                          got_id[size_t(r)]),
                                false;
                     return true;
                   });
      }
}

// One attention case: sequences given as (query rows, first query position).
void test_attention_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                         const std::vector<std::pair<int32_t, int32_t>> &seqs, const char *label) {
  const Act act = ops.act();
  check_case(env,
             fmt("attention[%s] %s heads %d kv_heads %d head_dim %d block %d seqs %zu", cuda::act_name(act), label,
                 n_heads, n_kv, hd, bs, seqs.size()),
             [&](std::string &why) {
               const int32_t n_seqs = int32_t(seqs.size());
               std::vector<int32_t> q_start(size_t(n_seqs) + 1, 0), pos0(static_cast<size_t>(n_seqs));
               int32_t max_blocks = 0, total_blocks = 0;
               for (int32_t s = 0; s < n_seqs; ++s) {
                 q_start[size_t(s) + 1] = q_start[size_t(s)] + seqs[size_t(s)].first;
                 pos0[size_t(s)] = seqs[size_t(s)].second;
                 const int32_t nb = (seqs[size_t(s)].second + seqs[size_t(s)].first + bs - 1) / bs;
                 max_blocks = std::max(max_blocks, nb);
                 total_blocks += nb;
               }
               const int32_t T = q_start.back();
               // Blocks handed out in a shuffled order from a pool with spares; unused entries of the table are -1.
               const int32_t n_blocks = total_blocks + 3;
               std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
               std::iota(perm.begin(), perm.end(), 0);
               std::shuffle(perm.begin(), perm.end(), g_rng);
               std::vector<int32_t> tables(size_t(n_seqs) * size_t(max_blocks), -1);
               const int64_t row = int64_t(n_kv) * hd;
               std::vector<float> kc(size_t(n_blocks) * size_t(bs) * size_t(row), NAN), vc = kc;  // NaN: must not be read
               int32_t next = 0;
               for (int32_t s = 0; s < n_seqs; ++s) {
                 const int32_t n_keys = seqs[size_t(s)].second + seqs[size_t(s)].first;
                 for (int32_t b = 0; b < (n_keys + bs - 1) / bs; ++b) tables[size_t(s * max_blocks + b)] = perm[size_t(next++)];
                 for (int32_t p = 0; p < n_keys; ++p) {
                   const int64_t slot = int64_t(tables[size_t(s * max_blocks + p / bs)]) * bs + p % bs;
                   auto kr = rand_act(size_t(row), act, -2, 2), vr = rand_act(size_t(row), act, -1, 1);
                   std::copy(kr.begin(), kr.end(), kc.begin() + slot * row);
                   std::copy(vr.begin(), vr.end(), vc.begin() + slot * row);
                 }
               }
               auto q = rand_act(size_t(T) * size_t(n_heads) * size_t(hd), act, -2, 2);
               const float scale = 1.0f / std::sqrt(float(hd));

               Dev dq = upload_act(q, act), dk = upload_act(kc, act), dv = upload_act(vc, act);
               DeviceBuffer dstart = upload_raw(q_start), dpos = upload_raw(pos0), dtab = upload_raw(tables);
               Dev out = poisoned(q.size(), act);
               cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos.ptr(), dtab.ptr(), max_blocks, bs};
               ops.attention(env.stream.get(), dq.ptr(), dk.ptr(), dv.ptr(), db, T, n_heads, n_kv, hd, scale, out.ptr());
               env.stream.synchronize();

               cpu::AttentionBatch cb{n_seqs, q_start.data(), pos0.data(), tables.data(), max_blocks, bs};
               std::vector<float> ref(q.size());
               cpu::attention(env.pool, q.data(), kc.data(), vc.data(), cb, n_heads, n_kv, hd, scale, ref.data());
               bool guard = false;
               // fp32 sums over thousands of keys in different orders: the error scales with the values summed
               // (|v| < 1), not with the result, which shrinks like 1/sqrt(keys); bf16 is bounded by its rounding
               const auto got = download(out, &guard);  // before close() reads guard
               return close(got, ref, tol_for(act), guard, &why, act == Act::F32 ? 0.05 : 0);
             });
}

void test_attention(Env &env, cuda::Ops &ops) {
  // decode batches: one query per sequence, positions on, just before and just after block boundaries
  std::vector<std::pair<int32_t, int32_t>> decode;
  for (int32_t p : {0, 1, 14, 15, 16, 17, 31, 32, 33, 100, 255, 256, 1000}) decode.push_back({1, p});
  std::shuffle(decode.begin(), decode.end(), g_rng);
  test_attention_case(env, ops, 32, 8, 128, 16, decode, "decode ragged");
  test_attention_case(env, ops, 16, 2, 64, 16, decode, "decode ragged");
  test_attention_case(env, ops, 8, 8, 256, 32, decode, "decode ragged");
  test_attention_case(env, ops, 4, 1, 80, 7, decode, "decode ragged, odd block");
  test_attention_case(env, ops, 6, 3, 70, 5, {{1, 0}, {1, 9}, {1, 10}, {1, 11}}, "head_dim not a multiple of 4");
  test_attention_case(env, ops, 2, 2, 16, 1, {{1, 0}, {1, 1}, {1, 2}}, "block size 1");
  if (g_small) return;
  // random ragged decode batch of 64
  std::vector<std::pair<int32_t, int32_t>> big;
  for (int i = 0; i < 64; ++i) big.push_back({1, int32_t(below(3000))});
  test_attention_case(env, ops, 32, 8, 128, 16, big, "64 random decodes");
  // prefill rows (causal within the chunk) next to decodes
  test_attention_case(env, ops, 8, 2, 64, 16, {{5, 0}, {1, 13}, {20, 6}, {1, 0}, {33, 31}}, "mixed prefill/decode");
  // long contexts
  test_attention_case(env, ops, 32, 8, 128, 16, {{1, 16383}, {1, 8191}}, "long context");
  test_attention_case(env, ops, 8, 1, 128, 256, {{1, 32767}}, "long context 32k, big blocks");
}

// ---------------------------------------------------------------------------------------------------------------
// Split-K decode attention (attention_split.cuh) against cpu::attention: the same ragged batches over shuffled
// block tables with every slot outside the batch's keys NaN, a NaN-poisoned output with a guard, and a workspace
// whose scratch part is NaN (only the tickets zero), so a partial the merge reads without its block having
// written it shows. Each case runs twice on the same workspace: the tickets must be back at zero after each
// call and the second output bitwise equal to the first (the merge order is fixed). The split count follows
// from the GPU's SM count, so a batch of a few rows runs most rows in several splits (batch 1 at 4096 keys:
// 32 on an H200) and a batch of 64 in one.

// The caches of one attention case: sequences given as (query rows, first query position), each owning
// ceil(keys / bs) blocks handed out in a shuffled order (so tables are not the identity), every key and value
// random, and 3 spare blocks plus every slot past a sequence's keys NaN (a kernel reading them fails the check).
struct PagedKv {
  std::vector<int32_t> tables;  // (n_seqs, max_blocks), -1 past a sequence's blocks
  std::vector<float> k, v;      // (n_blocks, bs, n_kv, hd)
  int32_t n_blocks = 0;
};
PagedKv make_paged_kv(const std::vector<std::pair<int32_t, int32_t>> &seqs, int32_t n_kv, int32_t hd, int32_t bs,
                      Act act, int32_t max_blocks, int32_t total_blocks) {
  PagedKv kv;
  const int32_t n_seqs = int32_t(seqs.size());
  kv.n_blocks = total_blocks + 3;  // spares, never handed out: NaN throughout
  std::vector<int32_t> perm(static_cast<size_t>(kv.n_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g_rng);
  kv.tables.assign(size_t(n_seqs) * size_t(max_blocks), -1);
  const int64_t row = int64_t(n_kv) * hd;
  kv.k.assign(size_t(kv.n_blocks) * size_t(bs) * size_t(row), NAN);
  kv.v = kv.k;
  int32_t next = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t n_keys = seqs[size_t(s)].second + seqs[size_t(s)].first;
    for (int32_t b = 0; b < (n_keys + bs - 1) / bs; ++b) kv.tables[size_t(s * max_blocks + b)] = perm[size_t(next++)];
    for (int32_t p = 0; p < n_keys; ++p) {
      const int64_t slot = int64_t(kv.tables[size_t(s * max_blocks + p / bs)]) * bs + p % bs;
      auto kr = rand_act(size_t(row), act, -2, 2), vr = rand_act(size_t(row), act, -1, 1);
      std::copy(kr.begin(), kr.end(), kv.k.begin() + slot * row);
      std::copy(vr.begin(), vr.end(), kv.v.begin() + slot * row);
    }
  }
  return kv;
}

struct DecodeCase {
  int32_t max_keys_extra = 0;  // max_keys = the longest row + this (the graph case: a bound, not the length)
  int32_t max_keys_cut = 0;    // max_keys = the longest row - this (past the contract's bound: still right)
  int64_t q_pad = 0;           // extra (NaN) elements per q row, as q inside a fused qkv buffer
  int64_t cache_offset = 0;    // caches start this many elements into their buffers (misaligned when odd)
};

void test_attention_decode_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                                const std::vector<std::pair<int32_t, int32_t>> &seqs, const char *label,
                                DecodeCase opt = {}) {
  const Act act = ops.act();
  const int32_t n_seqs = int32_t(seqs.size());
  std::vector<int32_t> q_start(size_t(n_seqs) + 1, 0), pos0(static_cast<size_t>(n_seqs));
  int32_t max_blocks = 1, total_blocks = 0, longest = 1;
  for (int32_t s = 0; s < n_seqs; ++s) {
    q_start[size_t(s) + 1] = q_start[size_t(s)] + seqs[size_t(s)].first;
    pos0[size_t(s)] = seqs[size_t(s)].second;
    const int32_t n_keys = seqs[size_t(s)].second + seqs[size_t(s)].first;
    max_blocks = std::max(max_blocks, (n_keys + bs - 1) / bs);
    total_blocks += (n_keys + bs - 1) / bs;
    if (seqs[size_t(s)].first > 0) longest = std::max(longest, n_keys);
  }
  const int32_t T = q_start.back();
  const int32_t max_keys = std::max(1, longest + opt.max_keys_extra - opt.max_keys_cut);
  const int32_t splits = ops.attention_splits(T, n_kv, max_keys);
  check_case(env,
             fmt("attention_decode[%s] %s heads %d kv_heads %d head_dim %d block %d seqs %zu max_keys %d splits %d%s%s",
                 cuda::act_name(act), label, n_heads, n_kv, hd, bs, seqs.size(), max_keys, splits,
                 opt.q_pad ? " strided q" : "", opt.cache_offset ? " offset caches" : ""),
             [&](std::string &why) {
               const PagedKv kv = make_paged_kv(seqs, n_kv, hd, bs, act, max_blocks, total_blocks);
               const std::vector<int32_t> &tables = kv.tables;
               const std::vector<float> &kc = kv.k, &vc = kv.v;
               const int64_t width = int64_t(n_heads) * hd, stride = width + opt.q_pad;
               auto q = rand_act(size_t(T) * size_t(width), act, -2, 2);
               std::vector<float> q_rows(size_t(T) * size_t(stride), NAN);  // columns past the heads: not to be read
               for (int32_t t = 0; t < T; ++t) std::copy_n(q.begin() + t * width, width, q_rows.begin() + t * stride);
               const float scale = 1.0f / std::sqrt(float(hd));
               std::vector<float> kc_dev(size_t(opt.cache_offset), NAN), vc_dev = kc_dev;
               kc_dev.insert(kc_dev.end(), kc.begin(), kc.end());
               vc_dev.insert(vc_dev.end(), vc.begin(), vc.end());

               Dev dq = upload_act(q_rows, act), dk = upload_act(kc_dev, act), dv = upload_act(vc_dev, act);
               DeviceBuffer dstart = upload_raw(q_start), dpos = upload_raw(pos0), dtab = upload_raw(tables);
               const size_t ws_bytes = ops.attention_workspace_bytes(T, n_heads, n_kv, hd, max_keys);
               const size_t ticket_bytes = size_t(T) * size_t(n_kv) * 4;
               if ((splits == 1) != (ws_bytes == 0) || (ws_bytes && ws_bytes < ticket_bytes))
                 return why = fmt("workspace of %zu bytes for %d splits", ws_bytes, splits), false;
               std::vector<uint8_t> ws_init(ws_bytes, 0xff);  // scratch NaN, tickets zero
               std::fill_n(ws_init.begin(), std::min(ticket_bytes, ws_bytes), uint8_t(0));
               DeviceBuffer ws = upload_raw(ws_init);  // one byte when ws_bytes is 0; then the op gets 0
               const CUdeviceptr ws_ptr = ws_bytes ? ws.ptr() : 0;
               const CUdeviceptr off = CUdeviceptr(opt.cache_offset * int64_t(cuda::act_size(act)));
               cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos.ptr(), dtab.ptr(), max_blocks, bs};

               cpu::AttentionBatch cb{n_seqs, q_start.data(), pos0.data(), tables.data(), max_blocks, bs};
               std::vector<float> ref(q.size());
               cpu::attention(env.pool, q.data(), kc.data(), vc.data(), cb, n_heads, n_kv, hd, scale, ref.data());

               std::vector<float> first;
               for (int run = 0; run < 2; ++run) {
                 Dev out = poisoned(q.size(), act);
                 ops.attention_decode(env.stream.get(), dq.ptr(), opt.q_pad ? stride : 0, dk.ptr() + off,
                                      dv.ptr() + off, db, T, n_heads, n_kv, hd, scale, max_keys, ws_ptr, ws_bytes,
                                      out.ptr());
                 env.stream.synchronize();
                 if (ws_bytes) {
                   std::vector<uint32_t> tickets(size_t(T) * size_t(n_kv));
                   ws.download(env.stream.get(), tickets.data(), ticket_bytes);
                   if (!std::all_of(tickets.begin(), tickets.end(), [](uint32_t x) { return x == 0; }))
                     return why = fmt("run %d left a ticket non-zero", run + 1), false;
                 }
                 bool guard = false;
                 const auto got = download(out, &guard);  // before close() reads guard
                 if (run == 1) {
                   if (!guard) return why = "run 2 wrote past the end of the output", false;
                   return std::memcmp(got.data(), first.data(), got.size() * sizeof(float)) == 0 ||
                          (why = "a second run on the same workspace gave different bits", false);
                 }
                 // fp32: sums over thousands of keys in different orders, an error that scales with the values
                 // summed (|v| < 1), not with the result (~1/sqrt(keys)); bf16 stays within its rounding, the
                 // probabilities' rounding to bf16 on tensor cores included (~2^-9 |v| / sqrt(keys))
                 if (!close(got, ref, tol_for(act), guard, &why, act == Act::F32 ? 0.05 : 0)) return false;
                 first = got;
               }
               return true;
             });
}

void test_attention_decode(Env &env, cuda::Ops &ops) {
  // one decode row per context, around block boundaries and long: most run in several splits
  std::vector<int32_t> contexts = {1, 15, 16, 17, 384};
  if (!g_small) contexts.push_back(4096);
  std::vector<std::pair<int32_t, int32_t>> decode;
  for (int32_t c : contexts) decode.push_back({1, c - 1});
  std::shuffle(decode.begin(), decode.end(), g_rng);
  // GQA 1, 2, 4, 8; head dims on tensor cores (64, 128, 256 in bf16) and off them (80, and everything in fp32)
  struct Heads {
    int32_t n_heads, n_kv;
  };
  for (Heads hh : {Heads{8, 8}, Heads{16, 8}, Heads{32, 8}, Heads{32, 4}})
    for (int32_t hd : {64, 128, 256, 80})
      test_attention_decode_case(env, ops, hh.n_heads, hh.n_kv, hd, 16, decode, "decode ragged");
  test_attention_decode_case(env, ops, 12, 4, 64, 16, decode, "decode ragged, GQA 3");
  test_attention_decode_case(env, ops, 6, 3, 70, 5, decode, "head_dim not a multiple of 4, odd block");
  test_attention_decode_case(env, ops, 4, 1, 128, 7, decode, "odd block");
  test_attention_decode_case(env, ops, 2, 2, 16, 1, {{1, 0}, {1, 1}, {1, 2}, {1, 40}}, "block size 1");
  // batch 1: the most splits
  for (int32_t c : contexts) {
    test_attention_decode_case(env, ops, 32, 8, 128, 16, {{1, c - 1}}, "batch 1");
    test_attention_decode_case(env, ops, 16, 8, 128, 16, {{1, c - 1}}, "batch 1");
  }
  for (int32_t c : {63, 64, 65, 128, 129, 1000})  // split lengths are multiples of 64 keys
    test_attention_decode_case(env, ops, 32, 8, 128, 32, {{1, c - 1}}, "batch 1, split boundaries");
  // a captured graph's bound: max_keys far above the rows; and a bound the rows exceed
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{1, 383}, {1, 16}}, "graph bound", {40960 - 384});
  test_attention_decode_case(env, ops, 32, 8, 64, 16, decode, "graph bound", {40960});
  test_attention_decode_case(env, ops, 32, 8, 128, 16, decode, "bound below the rows", {0, 300});
  // q inside a fused qkv buffer; caches at misaligned addresses (bf16: off the tensor-core path)
  test_attention_decode_case(env, ops, 32, 8, 128, 16, decode, "fused qkv", {0, 0, 2 * 8 * 128});
  test_attention_decode_case(env, ops, 16, 2, 64, 16, decode, "fused qkv", {0, 0, 2 * 2 * 64 + 8});
  test_attention_decode_case(env, ops, 32, 8, 128, 16, decode, "misaligned caches", {0, 0, 0, 1});
  test_attention_decode_case(env, ops, 16, 8, 64, 16, decode, "aligned cache offset", {0, 0, 0, 8});
  // prefill rows (causal inside the chunk) next to decodes, in several splits and in one
  test_attention_decode_case(env, ops, 8, 2, 64, 16, {{5, 0}, {1, 13}, {20, 6}, {1, 0}, {33, 31}, {40, 100}},
                             "mixed prefill/decode");
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{3, 500}, {1, 1000}, {2, 62}, {1, 0}}, "mixed prefill/decode");
  if (g_small) return;
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{5, 0}, {1, 13}, {20, 6}, {1, 4000}, {33, 31}, {40, 100}},
                             "mixed prefill/decode");
  // a batch of 64 (one split each, no workspace) and of 4 (several)
  std::vector<std::pair<int32_t, int32_t>> big, four;
  for (int i = 0; i < 64; ++i) big.push_back({1, int32_t(below(3000))});
  for (int i = 0; i < 4; ++i) four.push_back({1, int32_t(below(5000))});
  test_attention_decode_case(env, ops, 32, 8, 128, 16, big, "64 random decodes");
  test_attention_decode_case(env, ops, 32, 8, 128, 16, four, "4 random decodes");
  test_attention_decode_case(env, ops, 16, 8, 128, 16, four, "4 random decodes");
  // long contexts
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{1, 16383}, {1, 8191}}, "long context");
  test_attention_decode_case(env, ops, 8, 1, 128, 256, {{1, 32767}}, "long context 32k, big blocks");
}

// ---------------------------------------------------------------------------------------------------------------
// Prefill attention on tensor cores (attention_prefill.cuh; bf16 activations, head_dim 64 and 128) against
// cpu::attention on the same bf16 values: paged caches with shuffled block tables and every slot outside the
// batch's keys NaN, q optionally read from wider rows (as inside a fused qkv buffer) whose other columns are NaN,
// a poisoned output with a guard. Also checks that prefill_tiles covers every row once, inside its sequence.

// One case: sequences given as (query rows, first query position); q_pad extra elements per q row (0: none).
// uniform: q = 0, so every visible key gets probability exactly 1 (2^0, exact in bf16) and the result is the mean
// of the visible values with nothing rounded before P·V: held to the plain bf16 bound, this sees one key too
// many or too few in rows of hundreds, which the random cases' looser bound (below) may not.
void test_attention_prefill_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                                 const std::vector<std::pair<int32_t, int32_t>> &seqs, int64_t q_pad,
                                 const char *label, bool uniform = false) {
  const Act act = Act::BF16;
  check_case(env,
             fmt("attention_prefill[bf16] %s heads %d kv_heads %d head_dim %d block %d seqs %zu%s%s", label, n_heads,
                 n_kv, hd, bs, seqs.size(), q_pad ? " strided q" : "", uniform ? " uniform (q = 0)" : ""),
             [&](std::string &why) {
               const int32_t n_seqs = int32_t(seqs.size());
               std::vector<int32_t> q_start(size_t(n_seqs) + 1, 0), pos0(static_cast<size_t>(n_seqs));
               int32_t max_blocks = 1, total_blocks = 0;
               for (int32_t s = 0; s < n_seqs; ++s) {
                 q_start[size_t(s) + 1] = q_start[size_t(s)] + seqs[size_t(s)].first;
                 pos0[size_t(s)] = seqs[size_t(s)].second;
                 const int32_t nb = (seqs[size_t(s)].second + seqs[size_t(s)].first + bs - 1) / bs;
                 max_blocks = std::max(max_blocks, nb);
                 total_blocks += nb;
               }
               const int32_t T = q_start.back();
               const PagedKv kv = make_paged_kv(seqs, n_kv, hd, bs, act, max_blocks, total_blocks);
               const std::vector<int32_t> &tables = kv.tables;
               const std::vector<float> &kc = kv.k, &vc = kv.v;
               const int64_t width = int64_t(n_heads) * hd, stride = width + q_pad;
               auto q = rand_act(size_t(T) * size_t(width), act, -2, 2);
               if (uniform) std::fill(q.begin(), q.end(), 0.f);
               std::vector<float> q_rows(size_t(T) * size_t(stride), NAN);  // columns past the heads: not to be read
               for (int32_t t = 0; t < T; ++t) std::copy_n(q.begin() + t * width, width, q_rows.begin() + t * stride);
               const float scale = 1.0f / std::sqrt(float(hd));

               std::vector<int32_t> tiles;
               const int32_t n_tiles = cuda::Ops::prefill_tiles(q_start.data(), n_seqs, &tiles, pos0.data());
               std::vector<int> covered(static_cast<size_t>(T), 0);
               if (tiles.size() != size_t(n_tiles) * 3) return why = "prefill_tiles: size mismatch", false;
               for (int32_t i = 0; i < n_tiles; ++i) {
                 const int32_t s = tiles[size_t(3 * i)], r0 = tiles[size_t(3 * i + 1)], n = tiles[size_t(3 * i + 2)];
                 if (s < 0 || s >= n_seqs || n < 1 || n > cuda::Ops::kPrefillTileRows || r0 < q_start[size_t(s)] ||
                     r0 + n > q_start[size_t(s) + 1])
                   return why = fmt("prefill_tiles: bad tile (%d, %d, %d)", s, r0, n), false;
                 for (int32_t r = r0; r < r0 + n; ++r) ++covered[size_t(r)];
               }
               if (!std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }))
                 return why = "prefill_tiles: a row not covered exactly once", false;

               Dev dq = upload_act(q_rows, act), dk = upload_act(kc, act), dv = upload_act(vc, act);
               DeviceBuffer dstart = upload_raw(q_start), dpos = upload_raw(pos0), dtab = upload_raw(tables);
               DeviceBuffer dtiles = upload_raw(tiles);
               Dev out = poisoned(q.size(), act);
               cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos.ptr(), dtab.ptr(), max_blocks, bs};
               ops.attention_prefill(env.stream.get(), dq.ptr(), q_pad ? stride : 0, dk.ptr(), dv.ptr(), db, T,
                                     n_heads, n_kv, hd, scale, dtiles.ptr(), n_tiles, out.ptr());
               env.stream.synchronize();

               cpu::AttentionBatch cb{n_seqs, q_start.data(), pos0.data(), tables.data(), max_blocks, bs};
               std::vector<float> ref(q.size());
               cpu::attention(env.pool, q.data(), kc.data(), vc.data(), cb, n_heads, n_kv, hd, scale, ref.data());
               bool guard = false;
               // The probabilities are rounded to bf16 before P·V (the tensor cores' input, as in every flash
               // attention): an error of ~2^-9 of the values summed (|v| < 1), whatever the result's size, which
               // is what scale_floor is for. Without it, a float64 model of this kernel's rounding misses the
               // 2048-row case by 1.4-1.5x (errors up to ~1e-3 where rms(ref) is ~0.07); with 0.25, 0.40-0.45 of
               // the bound. A wrong key, row, head or mask still errs by far more.
               const auto got = download(out, &guard);  // before close() reads guard
               return close(got, ref, tol_for(act), guard, &why, uniform ? 0 : 0.25);
             });
}

void test_attention_prefill(Env &env, cuda::Ops &ops) {
  if (!ops.has_attention_prefill(64) || !ops.has_attention_prefill(128)) return;  // fp32 activations
  // one sequence from position 0: a single row, under, exactly and just over one tile, several, many
  for (int32_t rows : {1, 15, 64, 65, 200, 2048}) {
    if (rows == 2048 && g_small) continue;
    test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{rows, 0}}, 0, "one sequence");
    test_attention_prefill_case(env, ops, 16, 8, 64, 32, {{rows, 0}}, 0, "one sequence");
  }
  // chunked prefill: the earlier chunks' keys already in the cache
  test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{37, 100}}, 0, "chunked prefill");
  test_attention_prefill_case(env, ops, 8, 8, 64, 32, {{37, 100}}, 2 * 8 * 64, "chunked prefill");
  test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{512, 512}}, 2 * 8 * 128, "chunked prefill");
  test_attention_prefill_case(env, ops, 16, 8, 64, 32, {{512, 512}}, 0, "chunked prefill");
  // ragged batches: prefill chunks of different lengths and positions next to a decode row
  const std::vector<std::pair<int32_t, int32_t>> ragged = {{70, 0}, {1, 300}, {130, 17}, {64, 64}, {5, 1000}};
  struct Heads {
    int32_t n_heads, n_kv;
  };
  for (Heads hh : {Heads{32, 8}, Heads{16, 8}, Heads{8, 8}, Heads{28, 4}})
    for (int32_t hd : {64, 128})
      for (int32_t bs : {16, 32})
        test_attention_prefill_case(env, ops, hh.n_heads, hh.n_kv, hd, bs, ragged,
                                    (hd == 64) == (bs == 16) ? 2 * int64_t(hh.n_kv) * hd : 0, "ragged batch");
  // first positions and lengths on and around key-tile (64) and block boundaries; an empty sequence; blocks of 8
  test_attention_prefill_case(env, ops, 8, 2, 128, 16, {{64, 63}, {63, 1}, {129, 128}, {1, 64}, {2, 126}}, 0,
                              "tile boundaries");
  test_attention_prefill_case(env, ops, 4, 2, 64, 8, {{70, 0}, {0, 40}, {33, 5}, {1, 7}}, 0,
                              "empty sequence, block 8");
  // which keys each row sees, exactly (see uniform above)
  test_attention_prefill_case(env, ops, 8, 2, 128, 16, {{64, 63}, {63, 1}, {129, 128}, {1, 64}, {2, 126}}, 0,
                              "tile boundaries", true);
  test_attention_prefill_case(env, ops, 8, 2, 64, 32, ragged, 2 * 2 * 64, "ragged batch", true);
  test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{512, 512}}, 0, "chunked prefill", true);
  if (!g_small) test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{2048, 0}}, 0, "one sequence", true);
}

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
    const cuda::Driver &d = cuda::driver();
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
    cuda::CUgraph g = nullptr;
    cuda::CUgraphExec ge = nullptr;
    struct Owned {
      const cuda::Driver &d;
      cuda::CUgraph &g;
      cuda::CUgraphExec &ge;
      ~Owned() {
        if (ge) d.cuGraphExecDestroy(ge);
        if (g) d.cuGraphDestroy(g);
      }
    } owned{d, g, ge};
    cuda::check(d.cuStreamBeginCapture(s, cuda::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    try {
      lt.matmul(s, dx.ptr(), M, K, dw.ptr(), N, y.ptr(), true, db.ptr());
    } catch (...) {
      d.cuStreamEndCapture(s, &g);  // leave the stream usable
      throw;
    }
    cuda::check(d.cuStreamEndCapture(s, &g), "cuStreamEndCapture");
    cuda::check(d.cuGraphInstantiate(&ge, g, 0), "cuGraphInstantiate");
    x = rand_act(size_t(M * K), Act::BF16);
    const std::vector<uint8_t> xb = encode(x, Act::BF16);
    dx.buf.upload(s, xb.data(), xb.size());
    y.buf.fill_bytes(s, 0xff);
    cuda::check(d.cuGraphLaunch(ge, s), "cuGraphLaunch");
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
        std::vector<int32_t> seen_off{0}, seen_ids, seen_counts, bias_off{0}, bias_ids, counts;
        std::vector<float> bias_vals;
        std::vector<cuda::PenaltyRow> prow(static_cast<size_t>(n));
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
          // the GPU's lists: distinct ids of prompt + output with their count in the output, and the biases
          std::vector<int32_t> out_count(size_t(vocab), -1);
          for (int32_t i = 0; i < n_prompt + n_out; ++i) {
            int32_t &c = out_count[size_t(tokens[size_t(i)])];
            if (c < 0) seen_ids.push_back(tokens[size_t(i)]), c = 0;
            if (i >= n_prompt) ++c;
          }
          for (size_t j = size_t(seen_off.back()); j < seen_ids.size(); ++j) seen_counts.push_back(out_count[size_t(seen_ids[j])]);
          seen_off.push_back(int32_t(seen_ids.size()));
          for (const auto &[id, bias] : lp.logit_bias) bias_ids.push_back(id), bias_vals.push_back(bias);
          bias_off.push_back(int32_t(bias_ids.size()));
          prow[size_t(r)] = {lp.repetition_penalty, lp.presence_penalty, lp.frequency_penalty};
        }
        DeviceBuffer dl = upload_raw(host), dr = upload_raw(prow), dso = upload_raw(seen_off), dsi = upload_raw(seen_ids),
                     dsc = upload_raw(seen_counts), dbo = upload_raw(bias_off), dbi = upload_raw(bias_ids),
                     dbv = upload_raw(bias_vals);
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

}  // namespace

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
      test_kv_store(env, ops);
      test_rope_store(env, ops);
      if (act == Act::F32) test_argmax(env, ops);  // fp32 logits whatever the activations
      if (act == Act::F32) test_sample(env, ops);
      if (act == Act::F32) test_penalties(env, ops);
      if (act == Act::F32) test_top_logprobs(env, ops);
      test_attention(env, ops);
      test_attention_decode(env, ops);
      test_attention_prefill(env, ops);
      std::printf("  %s activations: %d checks\n", cuda::act_name(act), g_passed + g_failed - before);
    }
  } catch (const std::exception &e) {
    record(false, "setup", e.what());
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
