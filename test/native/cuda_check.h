// The harness the CUDA op tests share (test_cuda_ops.cpp and test/native/cuda_ops/*.cpp, one program): device
// buffers holding activations (fp32 or bf16) or NaN poison with a guard past the end, the comparison against the
// CPU op's result, one check per case with CUDA errors failing it, and the test entry points by op family.
#pragma once

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
#include "backend/cuda/staged_upload.h"
#include "logits_processors.h"
#include "sampling.h"
#include "status.h"

namespace cuda_tests {

using namespace vt;
using vt::cuda::Act;
using vt::cuda::CUdeviceptr;
using vt::cuda::DeviceBuffer;

inline cuda::CUstream g_stream = nullptr;  // every copy, fill and kernel of the checks runs on this one stream
inline bool g_small = false;  // VT_TEST_SMALL: skip the big cases
inline const char *g_only = nullptr;  // VT_TEST_ONLY: only the cases whose name contains it (e.g. "gemv_norm")

// The GEMVs' plain form (no early weight loads: what a GPU without PDL runs), to check against the _early one.
inline CudaOpsTuning plain_loads() {
  CudaOpsTuning t;
  t.early_loads = false;
  return t;
}


inline uint16_t to_bf16(float f) {  // round to nearest even, as the kernels do
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// Random activations, representable in the mode's type (so the CPU sees exactly what the GPU sees).
inline std::vector<float> rand_act(size_t n, Act act, double lo = -1, double hi = 1) {
  std::vector<float> v(n);
  for (auto &x : v) {
    x = float(uni(lo, hi));
    if (act == Act::BF16) x = bf16_to_f32(to_bf16(x));
  }
  return v;
}

inline std::vector<uint8_t> encode(const std::vector<float> &v, Act act) {
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

inline Dev upload_act(const std::vector<float> &v, Act act, size_t guard = 0) {
  Dev d{DeviceBuffer((v.size() + guard) * cuda::act_size(act)), v.size(), guard, act};
  std::vector<uint8_t> b = encode(v, act);
  b.resize((v.size() + guard) * cuda::act_size(act), 0xff);
  d.buf.upload(g_stream, b.data(), b.size());
  return d;
}
inline Dev poisoned(size_t n, Act act, size_t guard = 64) {
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
inline std::vector<float> download(const Dev &d, bool *guard_ok = nullptr) {
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
inline bool close(const std::vector<float> &got, const std::vector<float> &ref, double tol, bool guard_ok, std::string *why,
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

inline double tol_for(Act act) { return act == Act::F32 ? 1e-5 : 1e-2; }

// close()'s scale_floor for a K-term fp32 dot product: its accumulation error walks randomly over the terms, about
// sqrt(K) * 2^-24 * (the l2 norm of the terms) on each side (the kernel's sum and a float reference's), however far
// the result cancels below its terms. A lone output (N 1) has no rms to stand for its terms, and a sum of 64 random
// terms that cancels to 1/1000 of them missed a relative bound by 10x on the H200 (gemv_swiglu_norm[f32] M 1 K 64
// I 1, 1 run in 3). terms_rms: the rms over the outputs of that l2 norm (times the sensitivity of what the op
// computes from the sums, where it is not the sums themselves).
inline double accumulation_floor(double terms_rms, int64_t K, double tol) {
  return 2 * std::sqrt(double(K)) * 0x1p-24 * terms_rms / tol;
}

// silu(g) * u's sensitivity to the rounding of its two sums, |silu'(g) u| Tg + |silu(g)| Tu (Tg, Tu: the l2 norms of
// the gate's and up's terms), as the rms over M x I outputs: close()'s accumulation_floor for SwiGLU. gu(M, 2I): the
// gate|up sums; term_norm(m, j): the l2 norm of the terms of row m's sum j (j < 2I).
template <class Sums, class TermNorm>
double swiglu_sensitivity_rms(const Sums &gu, int64_t M, int64_t I, TermNorm term_norm) {
  double fss = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu[size_t(m * 2 * I + i)], u = gu[size_t(m * 2 * I + I + i)], sig = 1 / (1 + std::exp(-g));
      const double f = std::fabs(sig * (1 + g * (1 - sig)) * u) * term_norm(m, i) + std::fabs(g * sig) * term_norm(m, I + i);
      fss += f * f;
    }
  return M * I ? std::sqrt(fss / double(M * I)) : 0;
}

// The rms over M x N outputs of the l2 norm of each dot product's terms x[m][k] * w[n][k] (w bf16, row n of N).
inline double dot_terms_rms(const float *x, int64_t M, int64_t K, const std::vector<uint16_t> &w, int64_t N) {
  double total = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ss = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = double(x[m * K + k]) * bf16_to_f32(w[size_t(n * K + k)]);
        ss += t * t;
      }
      total += ss;
    }
  return M * N ? std::sqrt(total / double(M * N)) : 0;
}

// A CUDA graph of what `record()` enqueues on stream s, captured in thread-local mode as the engine captures its
// decode steps (an allocation or a synchronization inside would invalidate it), instantiated and owned. If record()
// throws, the capture is ended (the stream stays usable) and the exception goes on.
class CapturedGraph {
 public:
  template <class F>
  CapturedGraph(cuda::CUstream s, F record) {
    const cuda::Driver &d = cuda::driver();
    cuda::CUgraph g = nullptr;
    cuda::check(d.cuStreamBeginCapture(s, cuda::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    try {
      record();
    } catch (...) {
      d.cuStreamEndCapture(s, &g);
      if (g) d.cuGraphDestroy(g);
      throw;
    }
    cuda::check(d.cuStreamEndCapture(s, &g), "cuStreamEndCapture");
    const cuda::CUresult r = d.cuGraphInstantiate(&exec_, g, 0);
    d.cuGraphDestroy(g);
    cuda::check(r, "cuGraphInstantiate");
  }
  ~CapturedGraph() {
    if (exec_) cuda::driver().cuGraphExecDestroy(exec_);
  }
  CapturedGraph(const CapturedGraph &) = delete;
  CapturedGraph &operator=(const CapturedGraph &) = delete;
  void launch(cuda::CUstream s) { cuda::check(cuda::driver().cuGraphLaunch(exec_, s), "cuGraphLaunch"); }

 private:
  cuda::CUgraphExec exec_ = nullptr;
};

struct Env {
  cuda::Context &ctx;
  cuda::Stream &stream;
  cpu::ThreadPool &pool;
};

// Runs one check: the body returns true when it passed (filling *why otherwise); CUDA errors fail it.
template <class F>
void check_case(Env &env, const std::string &name, F body) {
  if (g_only && name.find(g_only) == std::string::npos) return;
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

inline std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char *f, ...) {
  char buf[300];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}


// The checks, one family per file of test/native/cuda_ops/ (the driver's in test_cuda_ops.cpp).
void test_driver(Env &env);
void test_cublaslt(Env &env);
void test_tensor_gemm(Env &env);
void test_embed(Env &env, cuda::Ops &ops);
void test_norms(Env &env, cuda::Ops &ops);
void test_rope(Env &env, cuda::Ops &ops);
void test_silu_mul(Env &env, cuda::Ops &ops);
void test_gemv(Env &env, cuda::Ops &ops);
void test_gemv_decode_shapes(Env &env, cuda::Ops &ops);
void test_gemv_swiglu(Env &env, cuda::Ops &ops);
void test_gemv_fused(Env &env, cuda::Ops &ops);
void test_gemv_norm_head(Env &env, cuda::Ops &ops);
void test_gemv_early(Env &env, cuda::Ops &ops);
void test_gemv_norm_rope(Env &env, cuda::Ops &ops);
void test_embed_norm(Env &env, cuda::Ops &ops);
void test_kv_store(Env &env, cuda::Ops &ops);
void test_rope_store(Env &env, cuda::Ops &ops);
void test_attention_gate(Env &env, cuda::Ops &ops);
void test_f16_to_bf16(Env &env, cuda::Ops &ops);
// One row of logits of the given kind (0-7): the cases greedy sampling must get right (argmax.cpp; the sampler's
// checks take them too).
void fill_logits_row(float *x, int32_t vocab, int kind);
void test_argmax(Env &env, cuda::Ops &ops);
void test_sample(Env &env, cuda::Ops &ops);
void test_penalties(Env &env, cuda::Ops &ops);
void test_top_logprobs(Env &env, cuda::Ops &ops);
void test_attention(Env &env, cuda::Ops &ops);
void test_attention_decode(Env &env, cuda::Ops &ops);
void test_rope_then_attention(Env &env, cuda::Ops &ops);
void test_attention_prefill(Env &env, cuda::Ops &ops);
// The Gated DeltaNet ops (gated_delta.cpp), through their own host class for ops' activation type.
void test_gated_delta(Env &env, cuda::Ops &ops);

}  // namespace cuda_tests
