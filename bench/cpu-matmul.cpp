// Timing harness for the CPU matmul (not a test). Prints, per SIMD path available here:
//  - decode (T = 1): GB/s of bf16 weights streamed for the Qwen3-0.6B shapes, read as a fraction of this
//    machine's plain multi-threaded read bandwidth (a sum over a 1 GiB buffer), measured alongside;
//  - prefill: GFLOP/s for T = 512, K = 1024, N = 3072 bf16 (and a few smaller T).
// Each figure is the median of several repetitions, with the best beside it: on a shared machine the best
// repetition is the closest to what the code does on a quiet one. Decode calls rotate over copies of the
// matrix spread through a 1.25 GiB arena so every call reads weights from DRAM, as a real decode step does
// (a model's weights do not fit in cache), instead of re-reading one matrix out of the last-level cache.
//
// Build and run (no -march: the kernels pick their SIMD path at run time):
//   g++ -std=c++20 -O2 -pthread -Icuda/include -Icuda/src bench/cpu-matmul.cpp cuda/src/backend/cpu/*.cpp -o /tmp/bench
//   /tmp/bench [threads=2]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_ops.h"

using namespace vt;
using namespace vt::cpu;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Plain read bandwidth: each thread sums its half of the buffer, read as four interleaved sequential streams
// with two 64-bit accumulators each (a single stream per core leaves the memory system idle between the
// prefetcher's requests on this machine and reads ~30% slower; the gemv has several weight rows in flight).
double read_bandwidth(const uint64_t *buf, size_t words, int threads) {
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([&, i] {
      const uint64_t *p = buf + words * size_t(i) / size_t(threads);
      const size_t part = words / size_t(threads) / 4;
      uint64_t a[4][2] = {};
      for (size_t j = 0; j + 2 <= part; j += 2)
        for (int s = 0; s < 4; ++s) a[s][0] += p[s * part + j], a[s][1] += p[s * part + j + 1];
      uint64_t t = 0;
      for (auto &v : a) t += v[0] + v[1];
      sums[size_t(i)] = t;
    });
  for (auto &t : ts) t.join();
  double s = seconds_since(t0);
  volatile uint64_t sink = 0;
  for (auto v : sums) sink = sink + v;
  return double(words * 8) / s / 1e9;
}

}  // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ThreadPool pool(threads);

  const size_t arena_bytes = size_t(5) << 28;  // 1.25 GiB of random bf16 weights
  std::vector<uint16_t> arena(arena_bytes / 2);
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (auto &h : arena) {  // xorshift; exponents kept small so sums stay finite
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    h = uint16_t((r & 0x807f) | (0x3c00 + ((r >> 16) & 0x1ff)));
  }

  // This machine is shared and its bandwidth moves by 2x from minute to minute, so every decode repetition
  // is paired with a bandwidth measurement taken right before it, and the fraction is the median of the
  // per-pair ratios.
  auto mem_bw = [&] {
    return read_bandwidth(reinterpret_cast<const uint64_t *>(arena.data()), (size_t(1) << 30) / 8, threads);
  };
  std::vector<double> bw0;
  for (int i = 0; i < 5; ++i) bw0.push_back(mem_bw());
  std::printf("memory read bandwidth (%d threads, 1 GiB sum): %.1f GB/s median, %.1f best\n", threads, median(bw0),
              *std::max_element(bw0.begin(), bw0.end()));

  struct Dec { int64_t K, N; const char *what; };
  const Dec decode[] = {{1024, 1024, "k/v proj"}, {1024, 2048, "q proj"},      {1024, 3072, "up proj"},
                        {1024, 6144, "gate+up"},  {3072, 1024, "down proj"},   {1024, 151936, "lm head"}};

  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (!set_isa(isa)) continue;
    std::printf("\n[%s] decode T=1, bf16 weights from DRAM (median of 7)\n", isa_name(isa));
    for (const Dec &d : decode) {
      const size_t bytes = size_t(d.K * d.N) * 2;
      const size_t copies = std::max<size_t>(1, arena_bytes / bytes);
      std::vector<float> x(size_t(d.K)), y(size_t(d.N));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) * 0.1f - 0.3f;
      std::vector<double> gbs, bws, ratio;
      const int reps = isa == Isa::Scalar ? 3 : 7;
      for (int rep = 0; rep < reps; ++rep) {
        bws.push_back(mem_bw());
        // At least ~1.25 GiB per repetition, so small matrices are timed over many calls.
        auto t0 = Clock::now();
        size_t calls = std::max<size_t>(copies, 3);
        for (size_t c = 0; c < calls; ++c) {
          const uint8_t *w = reinterpret_cast<const uint8_t *>(arena.data()) + (c % copies) * bytes;
          matmul(pool, x.data(), 1, d.K, w, DType::BF16, d.N, nullptr, y.data());
        }
        gbs.push_back(double(bytes) * double(calls) / seconds_since(t0) / 1e9);
        ratio.push_back(gbs.back() / bws.back());
      }
      std::printf("  K=%-5lld N=%-6lld %-10s %5.1f GB/s (best %5.1f)  read bandwidth alongside %5.1f GB/s: %3.0f%%\n",
                  (long long)d.K, (long long)d.N, d.what, median(gbs), *std::max_element(gbs.begin(), gbs.end()),
                  median(bws), 100 * median(ratio));
    }

    std::printf("[%s] prefill bf16 K=1024 N=3072 (median of %d)\n", isa_name(isa), isa == Isa::Scalar ? 3 : 7);
    for (int64_t T : {16, 64, 512}) {
      const int64_t K = 1024, N = 3072;
      std::vector<float> x(size_t(T * K)), y(size_t(T * N));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 11) * 0.05f - 0.25f;
      std::vector<double> gf;
      const int reps = isa == Isa::Scalar ? 3 : 7;
      for (int rep = 0; rep < reps; ++rep) {
        auto t0 = Clock::now();
        int calls = 0;
        do {
          matmul(pool, x.data(), T, K, arena.data(), DType::BF16, N, nullptr, y.data());
          ++calls;
        } while (seconds_since(t0) < 0.05);
        gf.push_back(2.0 * double(T * K * N) * calls / seconds_since(t0) / 1e9);
      }
      const double best = *std::max_element(gf.begin(), gf.end());
      std::printf("  T=%-4lld %7.1f GFLOP/s (best %5.1f)\n", (long long)T, median(gf), best);
    }
  }
  return 0;
}
