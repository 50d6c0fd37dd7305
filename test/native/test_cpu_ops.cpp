// Checks every CPU backend op against a straightforward float64 reference written here, on fresh random
// inputs (seed printed; VT_TEST_SEED=n replays one), on every SIMD path this CPU has. Outputs are NaN-poisoned
// before each call, so an element the op forgot to write fails the check. Errors are measured against the
// magnitude of what was summed (Σ|terms|), the scale fp32 rounding error is proportional to, so a result
// that cancels to near zero is not held to an impossible relative bound.
//
// Prints one line per failing check and ends with "N passed, N failed"; exits non-zero on any failure.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/thread_pool.h"

using namespace vt;
using namespace vt::cpu;

namespace {


std::vector<float> randf(size_t n, double lo = -1, double hi = 1) {
  std::vector<float> v(n);
  for (auto &x : v) x = float(uni(lo, hi));
  return v;
}

// Weights as stored bits, with an independent float64 decoding of each element (not dtype.h's).
struct Weights {
  DType dt;
  std::vector<uint8_t> bytes;
  std::vector<double> val;
};

double decode_f16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  return (h & 0x8000) ? -v : v;
}

Weights rand_weights(DType dt, size_t n) {
  Weights w{dt, std::vector<uint8_t>(n * dtype_size(dt)), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) {
    uint16_t sign = below(2) ? 0x8000 : 0;
    if (dt == DType::F32) {
      float f = float(uni(-1, 1));
      std::memcpy(&w.bytes[i * 4], &f, 4);
      w.val[i] = f;
    } else if (dt == DType::BF16) {  // exponents 2^-9 .. 2^1, random 7-bit mantissa
      uint16_t h = uint16_t(sign | (118 + below(11)) << 7 | below(128));
      std::memcpy(&w.bytes[i * 2], &h, 2);
      w.val[i] = std::ldexp(1.0 + (h & 127) / 128.0, ((h >> 7) & 255) - 127) * (sign ? -1 : 1);
    } else {  // fp16: one in ten subnormal, else 2^-6 .. 2^1
      int e = below(10) == 0 ? 0 : 9 + int(below(8));
      uint16_t h = uint16_t(sign | e << 10 | below(1024));
      std::memcpy(&w.bytes[i * 2], &h, 2);
      w.val[i] = decode_f16(h);
    }
  }
  return w;
}

std::vector<float> nan_vec(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

// ---------------------------------------------------------------------------------------------------------
void test_thread_pool() {
  for (int nt : {1, 2, 3, 5}) {
    ThreadPool pool(nt);
    bool ok = true;
    std::string why;
    for (int64_t n : {0, 1, 2, 5, 7, 64, 1000})
      for (int64_t grain : {1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::vector<std::atomic<int>> by_thread(static_cast<size_t>(nt));
        std::atomic<int> chunks{0}, small{0};
        pool.run(n, grain, [&](int64_t b, int64_t e, int ti) {
          chunks++;
          if (e - b < std::min(grain, n)) small++;
          if (ti >= 0 && ti < nt) by_thread[size_t(ti)]++;
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
        for (int64_t i = 0; i < n; ++i)
          if (hits[size_t(i)] != 1) ok = false, why = "index covered " + std::to_string(hits[size_t(i)]) + " times";
        for (auto &c : by_thread)
          if (c > 1) ok = false, why = "a thread index ran two chunks";
        if (chunks > nt || small) ok = false, why = "chunk count or size off (n " + std::to_string(n) + ")";
      }
    record(ok, "thread_pool coverage, threads " + std::to_string(nt), why);

    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 20000; ++rep)
      pool.run(nt * 4, 1, [&](int64_t b, int64_t e, int) { sum += e - b; });
    record(sum == int64_t(20000) * nt * 4, "thread_pool 20000 back-to-back runs, threads " + std::to_string(nt));

    bool threw = false;
    try {
      pool.run(100, 1, [&](int64_t, int64_t, int ti) {
        if (ti == nt - 1) throw std::runtime_error("boom");
      });
    } catch (const std::runtime_error &) {
      threw = true;
    }
    std::atomic<int64_t> after{0};
    pool.run(100, 1, [&](int64_t b, int64_t e, int) { after += e - b; });
    record(threw && after == 100, "thread_pool exception reaches the caller, threads " + std::to_string(nt));
  }
  // The sleeping path: no spinning at all, so every dispatch goes through the condition variables.
  setenv("VT_CPU_SPIN_US", "0", 1);
  {
    ThreadPool pool(3);
    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 3000; ++rep) pool.run(3, 1, [&](int64_t b, int64_t e, int) { sum += e - b; });
    record(sum == 9000, "thread_pool without spinning (condition variable path)");
  }
  unsetenv("VT_CPU_SPIN_US");
}

// ---------------------------------------------------------------------------------------------------------
void test_matmul(Isa isa, ThreadPool &pool, int64_t k_block = 0) {
  matmul_set_k_block(k_block);
  struct Shape { int64_t T, K, N; };
  const Shape shapes[] = {{1, 67, 13},  {3, 67, 13},   {17, 67, 13},  {1, 64, 32},    {8, 256, 40},
                          {9, 256, 40}, {1, 1024, 70}, {5, 1000, 33}, {13, 300, 100}, {512, 67, 13},
                          {512, 256, 67}, {64, 1030, 48}, {2, 16, 1},  {40, 3, 5},
                          // K % 32 == 1 and strips whose last vector is nearly full (N % 32 = 31 or 29)
                          {1, 33, 31}, {4, 97, 63}, {20, 97, 63}, {20, 97, 29}};
  for (const Shape &sh : shapes)
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (bool with_bias : {false, true}) {
        auto x = randf(size_t(sh.T * sh.K));
        Weights w = rand_weights(dt, size_t(sh.N * sh.K));
        auto bias = randf(size_t(sh.N));
        // 64 poisoned floats past the end catch a store that runs over the last row.
        auto y = nan_vec(size_t(sh.T * sh.N) + 64);
        matmul(pool, x.data(), sh.T, sh.K, w.bytes.data(), dt, sh.N, with_bias ? bias.data() : nullptr, y.data());
        bool guard_ok = std::all_of(y.end() - 64, y.end(), [](float v) { return std::isnan(v); });
        y.resize(y.size() - 64);
        std::vector<double> ref(y.size()), scale(y.size());
        for (int64_t t = 0; t < sh.T; ++t)
          for (int64_t n = 0; n < sh.N; ++n) {
            double s = with_bias ? bias[size_t(n)] : 0, a = std::fabs(s);
            for (int64_t k = 0; k < sh.K; ++k) {
              double p = double(x[size_t(t * sh.K + k)]) * w.val[size_t(n * sh.K + k)];
              s += p, a += std::fabs(p);
            }
            ref[size_t(t * sh.N + n)] = s, scale[size_t(t * sh.N + n)] = a;
          }
        std::string why;
        bool ok = close(y.data(), ref.data(), scale.data(), y.size(), 1e-5, &why);
        if (!guard_ok) ok = false, why = "wrote past the end of y";
        char name[160];
        std::snprintf(name, sizeof name, "matmul[%s] T=%lld K=%lld N=%lld %s%s threads=%d k_block=%lld",
                      isa_name(isa), (long long)sh.T, (long long)sh.K, (long long)sh.N, dtype_name(dt),
                      with_bias ? " +bias" : "", pool.size(), (long long)k_block);
        record(ok, name, why);
      }
}

// ---------------------------------------------------------------------------------------------------------
void test_small_ops(ThreadPool &pool) {
  // embed: exact.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t vocab = 50, dim = 37, T = 9;
    Weights table = rand_weights(dt, size_t(vocab * dim));
    std::vector<int32_t> ids(T);
    for (auto &i : ids) i = int32_t(below(vocab));
    ids[0] = 0, ids[1] = int32_t(vocab - 1);
    auto out = nan_vec(size_t(T * dim));
    embed(table.bytes.data(), dt, dim, ids.data(), T, out.data());
    bool ok = true;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < dim; ++i) ok &= double(out[size_t(t * dim + i)]) == table.val[size_t(ids[t] * dim + i)];
    record(ok, std::string("embed ") + dtype_name(dt));
  }

  for (int64_t rows : {1, 3, 70})
    for (int64_t dim : {1, 13, 1024}) {
      const float eps = 1e-6f;
      auto x = randf(size_t(rows * dim), -3, 3), w = randf(size_t(dim), 0.5, 1.5), res = randf(size_t(rows * dim));
      std::vector<double> ref(x.size()), scale(x.size()), res_ref(x.size()), res_scale(x.size());
      auto norm_ref = [&](const std::vector<double> &in) {
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < dim; ++i) ss += in[size_t(r * dim + i)] * in[size_t(r * dim + i)];
          double inv = 1 / std::sqrt(ss / double(dim) + eps);
          for (int64_t i = 0; i < dim; ++i) {
            ref[size_t(r * dim + i)] = in[size_t(r * dim + i)] * inv * w[size_t(i)];
            scale[size_t(r * dim + i)] = std::fabs(ref[size_t(r * dim + i)]);
          }
        }
      };
      std::string tag = " rows=" + std::to_string(rows) + " dim=" + std::to_string(dim), why;

      std::vector<double> xin(x.begin(), x.end());
      norm_ref(xin);
      auto xn = x;
      rmsnorm(pool, xn.data(), rows, dim, w.data(), eps);
      record(close(xn.data(), ref.data(), scale.data(), xn.size(), 1e-5, &why), "rmsnorm" + tag, why);

      for (size_t i = 0; i < x.size(); ++i) {
        res_ref[i] = double(res[i]) + double(x[i]);
        res_scale[i] = std::fabs(double(res[i])) + std::fabs(double(x[i]));
      }
      norm_ref(res_ref);
      auto out = nan_vec(x.size());
      add_rmsnorm(pool, res.data(), x.data(), rows, dim, w.data(), eps, out.data());
      bool ok = close(res.data(), res_ref.data(), res_scale.data(), res.size(), 1e-6, &why);
      record(ok && close(out.data(), ref.data(), scale.data(), out.size(), 1e-5, &why), "add_rmsnorm" + tag, why);
    }

  for (int64_t T : {1, 5, 33})
    for (int32_t hd : {64, 128, 10}) {
      const int32_t n_heads = 3, half = hd / 2;
      const float attn_scale = T == 5 ? 1.1f : 1.f;
      std::vector<int32_t> pos(static_cast<size_t>(T));
      for (auto &p : pos) p = int32_t(below(40000));
      pos[0] = 0;
      std::vector<float> inv_freq(static_cast<size_t>(half));
      for (int i = 0; i < half; ++i) inv_freq[size_t(i)] = float(std::pow(1e6, -2.0 * i / hd));
      auto x = randf(size_t(T * n_heads * hd));
      std::vector<double> ref(x.size()), scale(x.size());
      for (int64_t t = 0; t < T; ++t)
        for (int h = 0; h < n_heads; ++h)
          for (int i = 0; i < half; ++i) {
            size_t a = size_t((t * n_heads + h) * hd + i), b = a + size_t(half);
            double ang = double(pos[size_t(t)]) * double(inv_freq[size_t(i)]);
            double c = std::cos(ang) * attn_scale, s = std::sin(ang) * attn_scale;
            ref[a] = x[a] * c - x[b] * s;
            ref[b] = x[b] * c + x[a] * s;
            scale[a] = scale[b] = (std::fabs(x[a]) + std::fabs(x[b])) * attn_scale;
          }
      rope(pool, x.data(), T, n_heads, hd, pos.data(), inv_freq.data(), attn_scale);
      std::string why;
      record(close(x.data(), ref.data(), scale.data(), x.size(), 1e-5, &why),
             "rope T=" + std::to_string(T) + " head_dim=" + std::to_string(hd), why);
    }

  for (int64_t T : {1, 4, 19})
    for (bool fused : {false, true}) {
      const int64_t F = 67;
      auto gu = randf(size_t(T * 2 * F), -8, 8);
      const float *gate = gu.data(), *up = fused ? gu.data() + F : gu.data() + T * F;
      const int64_t ld = fused ? 2 * F : F;
      auto out = nan_vec(size_t(T * F));
      silu_mul(pool, gate, up, T, F, out.data());
      std::vector<double> ref(out.size()), scale(out.size());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < F; ++i) {
          double g = gate[t * ld + i], u = up[t * ld + i];
          ref[size_t(t * F + i)] = g / (1 + std::exp(-g)) * u;
          scale[size_t(t * F + i)] = std::fabs(ref[size_t(t * F + i)]);
        }
      std::string why;
      record(close(out.data(), ref.data(), scale.data(), out.size(), 1e-5, &why),
             "silu_mul T=" + std::to_string(T) + (fused ? " gate_up(T, 2F)" : " separate"), why);
    }

  {  // kv_store: the named slots get the rows, a negative slot is skipped, nothing else changes
    const int32_t n_kv = 3, hd = 20, n_slots = 64;
    const int64_t T = 7, row = n_kv * hd;
    auto k = randf(size_t(T * row)), v = randf(size_t(T * row));
    std::vector<int32_t> perm(n_slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g_rng);
    std::vector<int32_t> slot(perm.begin(), perm.begin() + T);
    slot[3] = -1;
    auto kc = randf(size_t(n_slots * row)), vc = randf(size_t(n_slots * row));
    auto kc0 = kc, vc0 = vc;
    kv_store(k.data(), v.data(), T, n_kv, hd, slot.data(), kc.data(), vc.data());
    for (int64_t t = 0; t < T; ++t)
      if (slot[size_t(t)] >= 0)
        for (int64_t i = 0; i < row; ++i) {
          kc0[size_t(slot[size_t(t)] * row + i)] = k[size_t(t * row + i)];
          vc0[size_t(slot[size_t(t)] * row + i)] = v[size_t(t * row + i)];
        }
    record(kc == kc0 && vc == vc0, "kv_store");
  }
}

// ---------------------------------------------------------------------------------------------------------
struct SeqSpec { int32_t q_len, pos0; };

void test_attention(Isa isa, ThreadPool &pool, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                    const std::vector<SeqSpec> &seqs, const char *label) {
  const int32_t n_seqs = int32_t(seqs.size());
  int32_t max_blocks = 0, total_blocks = 0;
  for (auto &s : seqs) max_blocks = std::max(max_blocks, (s.pos0 + s.q_len + bs - 1) / bs);
  total_blocks = n_seqs * max_blocks + 3;
  // Every sequence's blocks come from one shuffled pool of ids: tables are neither contiguous nor ordered.
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), g_rng);
  std::vector<int32_t> tables(size_t(n_seqs * max_blocks));
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = ids[i];
  std::vector<int32_t> q_start(static_cast<size_t>(n_seqs + 1), 0), pos0(static_cast<size_t>(n_seqs));
  for (int32_t s = 0; s < n_seqs; ++s) {
    q_start[size_t(s + 1)] = q_start[size_t(s)] + seqs[size_t(s)].q_len;
    pos0[size_t(s)] = seqs[size_t(s)].pos0;
  }
  const int32_t T = q_start[size_t(n_seqs)];
  const int64_t slot_row = int64_t(n_kv) * hd;
  // The whole cache is random, including positions after each query: any key the mask lets through shows up.
  auto kc = randf(size_t(total_blocks) * size_t(bs) * size_t(slot_row));
  auto vc = randf(kc.size());
  auto q = randf(size_t(T) * size_t(n_heads) * size_t(hd));
  const float scale = float(1 / std::sqrt(double(hd)));
  AttentionBatch b{n_seqs, q_start.data(), pos0.data(), tables.data(), max_blocks, bs};
  auto out = nan_vec(q.size());
  attention(pool, q.data(), kc.data(), vc.data(), b, n_heads, n_kv, hd, scale, out.data());

  std::vector<double> ref(out.size()), tol_scale(out.size());
  const int32_t group = n_heads / n_kv;
  for (int32_t s = 0; s < n_seqs; ++s)
    for (int32_t r = q_start[size_t(s)]; r < q_start[size_t(s + 1)]; ++r) {
      const int32_t pos = pos0[size_t(s)] + (r - q_start[size_t(s)]);
      for (int32_t h = 0; h < n_heads; ++h) {
        const float *qh = &q[(size_t(r) * n_heads + h) * hd];
        std::vector<double> sc(size_t(pos + 1));
        std::vector<const float *> vrow(size_t(pos + 1));
        double mx = -1e300;
        for (int32_t p = 0; p <= pos; ++p) {
          int64_t slot = int64_t(tables[size_t(s * max_blocks + p / bs)]) * bs + p % bs;
          const float *kr = &kc[size_t(slot * slot_row + (h / group) * hd)];
          vrow[size_t(p)] = &vc[size_t(slot * slot_row + (h / group) * hd)];
          double d = 0;
          for (int32_t i = 0; i < hd; ++i) d += double(qh[i]) * kr[i];
          sc[size_t(p)] = d * scale;
          mx = std::max(mx, sc[size_t(p)]);
        }
        double den = 0;
        for (auto &x : sc) den += (x = std::exp(x - mx));
        for (int32_t i = 0; i < hd; ++i) {
          double o = 0, a = 0;
          for (int32_t p = 0; p <= pos; ++p) {
            o += sc[size_t(p)] * vrow[size_t(p)][i];
            a += sc[size_t(p)] * std::fabs(vrow[size_t(p)][i]);
          }
          ref[(size_t(r) * n_heads + h) * hd + size_t(i)] = o / den;
          tol_scale[(size_t(r) * n_heads + h) * hd + size_t(i)] = a / den;
        }
      }
    }
  std::string why;
  char name[200];
  std::snprintf(name, sizeof name, "attention[%s] %s heads=%d kv_heads=%d head_dim=%d block=%d threads=%d",
                isa_name(isa), label, n_heads, n_kv, hd, bs, pool.size());
  record(close(out.data(), ref.data(), tol_scale.data(), out.size(), 2e-5, &why), name, why);
}

void test_attention_all(Isa isa, ThreadPool &pool) {
  // Ragged: a long-context decode, a prefill chunk continuing at pos0 > 0, a fresh prefill that ends on a
  // block boundary, and decodes on both sides of a block boundary.
  const std::vector<SeqSpec> ragged = {{1, 700}, {37, 20}, {16, 0}, {1, 15}, {1, 16}, {3, 31}};
  test_attention(isa, pool, 8, 2, 64, 16, ragged, "ragged");
  test_attention(isa, pool, 16, 8, 128, 16, ragged, "ragged");
  test_attention(isa, pool, 4, 4, 72, 7, {{5, 0}, {1, 13}, {20, 6}}, "odd sizes");
  test_attention(isa, pool, 6, 1, 40, 32, {{700, 0}}, "long prefill");
  test_attention(isa, pool, 2, 2, 16, 1, {{1, 0}, {2, 1}}, "tiny");
}

}  // namespace

int main() {
  uint64_t seed = std::random_device{}();
  if (const char *s = std::getenv("VT_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  g_rng.seed(seed);
  std::printf("test_cpu_ops: seed %llu (VT_TEST_SEED=%llu replays it); paths:", (unsigned long long)seed,
              (unsigned long long)seed);
  for (Isa i : isas()) std::printf(" %s", isa_name(i));
  std::printf("\n");

  auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](const char *what) {
    auto t1 = std::chrono::steady_clock::now();
    if (std::getenv("VT_TEST_TIMES"))
      std::printf("  %s: %.2f s\n", what, std::chrono::duration<double>(t1 - t0).count());
    t0 = t1;
  };
  test_thread_pool();
  lap("thread pool");
  {
    Isa parsed;
    bool ok = true;
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
      ok &= isa_from_name(isa_name(i), &parsed) && parsed == i;
    record(ok && !isa_from_name("sse9", &parsed) && isa_supported(Isa::Scalar), "isa names (VT_CPU_ISA values)");
  }
  ThreadPool pool2(2), pool3(3), pool1(1);
  test_small_ops(pool2);
  lap("small ops");
  for (Isa isa : isas()) {
    set_isa(isa);
    test_matmul(isa, pool3);
    test_matmul(isa, pool2, 256);  // the prefill regime's K blocking (sums carried in y between blocks)
    lap(isa_name(isa));
    test_attention_all(isa, pool2);
    lap("attention");
  }
  set_isa(isas().back());
  test_attention_all(isas().back(), pool1);
  test_matmul(isas().back(), pool1);
  lap("one thread");

  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
