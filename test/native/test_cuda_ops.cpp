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
#include "backend/cuda/cuda_ops.h"
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
    for (Act act : {Act::F32, Act::BF16}) {
      cuda::Ops ops(ctx, act);
      const int before = g_passed + g_failed;
      test_embed(env, ops);
      test_norms(env, ops);
      test_rope(env, ops);
      test_silu_mul(env, ops);
      test_gemv(env, ops);
      test_kv_store(env, ops);
      test_attention(env, ops);
      std::printf("  %s activations: %d checks\n", cuda::act_name(act), g_passed + g_failed - before);
    }
  } catch (const std::exception &e) {
    record(false, "setup", e.what());
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
