// The GEMM benchmark, and the measurement behind the selection table (cuda/src/backend/cuda/gemm_table.cpp): every
// product of Qwen3-0.6B and Qwen3-8B (q|k|v, o, gate|up as the fused SwiGLU product, down, the lm_head's fp32
// logits) at M = 1 ... 8,192 rows, timed through cuBLASLt (when the machine has it), the decode GEMV (M <= 16), and
// each of our tensor-core tiles (gemm_mma / gemm_wgmma) with split-K off and at 1, 2 and 4 blocks per SM. The
// weights rotate over >= 1 GiB of copies, so small-M products stream them from DRAM as a decode step does.
//
//   bench_cuda_gemm [--reps N] [--m 16,32,...] [--json FILE] [--products TEXT] [--tiles TEXT]
//
// --products / --tiles: only the products / tiles whose name contains TEXT (a profiler run over one kernel;
// "none" times cuBLASLt and the table's choice alone). The table printed then covers what was timed.
//
// Prints, per product and M: cuBLASLt, the GEMV, the table's choice and the best of ours (with its tile), in us,
// TFLOP/s and weight GB/s, beside the device copy rate and the GPU's dense bf16 peak (the clocks and SMs the
// driver reports x 1024 bf16 FMA per SM per clock on Hopper, 512 on Ampere / Ada / Blackwell consumer parts: a
// datasheet figure, said as such). Then the table this GPU should use: the GEMV's row limit (the most rows at which
// the GEMV's step time is still the least) and per product and M the fastest tile (and split-K blocks per SM), as
// C++ entries for gemm_table.cpp's shapes. SwiGLU: cuBLASLt's figure is its plain
// product over gate|up plus our silu_mul, which is what the engine would otherwise run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm_table.h"
#include "backend/cuda/tensor_gemm.h"
#include "bench_json.h"
#include "cuda_bench.h"

using namespace vt;
using namespace vt::cuda;
using Out = TensorGemm::Out;

namespace {

int g_reps = 30;

// Median over samples of `chain` calls of fn(i) back to back between one pair of events (per call), after a warm-up;
// fewer samples for long calls so one candidate costs at most ~60 ms. A product runs in a step right after another
// kernel, so a chain (each call a different weight copy) times what a step sees: each launch's start under the
// previous one's tail (programmatic dependent launch), which a call timed alone between events cannot show (session
// 20: alone our 8-row tile had looked faster than cuBLASLt's; in the step's profile it was 1.25x slower).
template <class F>
double median_us(Stream &s, F fn, int chain = 4) {
  Event a, b;
  a.record(s.get());
  for (int i = 0; i < 3 * chain; ++i) fn(i);
  b.record(s.get());
  b.synchronize();
  const double warm = 1e3 * Event::elapsed_ms(a, b) / 3;
  const int reps = std::max(5, std::min(g_reps, int(60e3 / std::max(warm, 1.0))));
  std::vector<Event> ev(size_t(2 * reps));
  for (int i = 0; i < reps; ++i) {
    ev[size_t(2 * i)].record(s.get());
    for (int j = 0; j < chain; ++j) fn(i * chain + j);
    ev[size_t(2 * i + 1)].record(s.get());
  }
  s.synchronize();
  std::vector<double> t(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) t[size_t(i)] = 1e3 * Event::elapsed_ms(ev[size_t(2 * i)], ev[size_t(2 * i + 1)]) / chain;
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[size_t(reps / 2)];
}

struct Product {
  const char *name;
  int64_t K, N;
  Out out;
  int model, count;  // which model (0: 0.6B, 1: 8B) and how many times a step runs it (its layers; lm_head once)
};
// N is the weight's rows (gate|up: 2I).
const Product kProducts[] = {
    {"0.6B qkv", 1024, 4096, Out::kBf16, 0, 28},       {"0.6B o_proj", 2048, 1024, Out::kBf16, 0, 28},
    {"0.6B gate_up", 1024, 6144, Out::kSwiGLU, 0, 28}, {"0.6B down", 3072, 1024, Out::kBf16, 0, 28},
    {"0.6B lm_head", 1024, 151936, Out::kF32, 0, 1},   {"8B qkv", 4096, 6144, Out::kBf16, 1, 36},
    {"8B o_proj", 4096, 4096, Out::kBf16, 1, 36},      {"8B gate_up", 4096, 24576, Out::kSwiGLU, 1, 36},
    {"8B down", 12288, 4096, Out::kBf16, 1, 36},       {"8B lm_head", 4096, 151936, Out::kF32, 1, 1},
};

struct Candidate {
  int tile;
  int blocks_per_sm;  // split-K target (0: none)
  std::string label() const {
    return std::string(TensorGemm::kTiles[tile].name) + (blocks_per_sm ? "/sk" + std::to_string(blocks_per_sm) : "");
  }
};

}  // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> ms = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 8192};
  std::string json_path, only_products, only_tiles;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::max(5, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--products") && i + 1 < argc) only_products = argv[++i];
    else if (!std::strcmp(argv[i], "--tiles") && i + 1 < argc) only_tiles = argv[++i];
    else if (!std::strcmp(argv[i], "--m") && i + 1 < argc) {
      ms.clear();
      for (char *p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) ms.push_back(std::atoll(p));
    }
  }
  const auto avail = cuda_available();
  if (!avail.ok) {
    std::printf("skipped: %s\n", avail.reason.c_str());
    return 0;
  }
  try {
    Context ctx;
    Stream s;
    Ops ops(ctx, Act::BF16);
    TensorGemm gemm(ctx, s.get());
    if (!gemm.available()) throw std::runtime_error(gemm.reason());
    CublasLt lt(ctx);
    int clock_khz = 0;
    driver().cuDeviceGetAttribute(&clock_khz, 13 /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE */, ctx.device());
    // dense bf16 FMA per SM per clock: Hopper and Blackwell datacenter 2048 (H100 SXM: 989 TFLOP/s at 1.83 GHz),
    // A100 1024, the others 512 (datasheet figures, not measured here)
    const int cc = ctx.compute_capability();
    const double fma_per_clk = cc == 90 || cc == 100 ? 2048 : cc == 80 ? 1024 : 512;
    const double peak_tflops = 2 * fma_per_clk * ctx.sm_count() * clock_khz * 1e3 * 1e-12;
    // The copy rate, the bandwidth ceiling of the small-M products
    double copy_gbs = 0;
    {
      DeviceBuffer a(size_t(1) << 30), b(size_t(1) << 30);
      a.fill_bytes(s.get(), 0x5a);
      const double us = median_us(
          s, [&](int) { check(driver().cuMemcpyDtoDAsync(b.ptr(), a.ptr(), a.bytes(), s.get()), "cuMemcpyDtoDAsync"); },
          1);
      copy_gbs = 2.0 * double(a.bytes()) / us * 1e-3;
    }
    const GemmTable &table = gemm_table(ctx.compute_capability(), gemm.has_wgmma());
    std::printf("cuda-gemm bench: %s (cc %d, %d SMs, %d MHz), driver %d; device copy %.0f GB/s; dense bf16 peak %.0f "
                "TFLOP/s (datasheet rate x clock); cuBLASLt %s; table: %s\n",
                ctx.name().c_str(), ctx.compute_capability(), ctx.sm_count(), clock_khz / 1000, avail.driver_version,
                copy_gbs, peak_tflops, lt.available() ? lt.library().c_str() : lt.reason().c_str(), table.family);

    std::vector<Candidate> cands;
    for (int t = 0; t < TensorGemm::kTileCount; ++t) {
      if (TensorGemm::kTiles[t].wgmma && !gemm.has_wgmma()) continue;
      if (!only_tiles.empty() && std::string(TensorGemm::kTiles[t].name).find(only_tiles) == std::string::npos) continue;
      if (TensorGemm::kTiles[t].multicast) {  // (never split)
        cands.push_back({t, 0});
        continue;
      }
      cands.push_back({t, 0});
      for (int b : {1, 2, 4}) cands.push_back({t, b});
    }
    // Per M: each candidate's time per product (for the table: a step's time, weighted by how often it runs each)
    std::map<int64_t, std::map<std::string, std::map<const Product *, double>>> times;
    std::map<int64_t, std::map<const Product *, double>> gemv_times, best_times;
    nlohmann::json rows = nlohmann::json::array();
    std::printf("\n%-14s %6s %10s %10s %10s %-22s %10s %-22s %8s %8s %8s\n", "product", "M", "cuBLASLt", "gemv",
                "table", "(its tile)", "best", "(tile)", "best/Lt", "TFLOP/s", "GB/s w");
    for (const Product &p : kProducts) {
      if (!only_products.empty() && std::string(p.name).find(only_products) == std::string::npos) continue;
      const size_t wbytes = size_t(p.N * p.K * 2);
      const int copies = int(std::max<size_t>(1, (size_t(1) << 30) / wbytes + 1));
      std::vector<DeviceBuffer> w;
      for (int c = 0; c < copies; ++c) {
        w.emplace_back(wbytes);
        fill_random(s, w.back(), uint64_t(c + 1));
      }
      const int64_t out_n = p.out == Out::kSwiGLU ? p.N / 2 : p.N;
      for (int64_t M : ms) {
        if (p.out == Out::kF32 && M > 256) continue;  // (logits are taken for a step's last rows only)
        DeviceBuffer x(size_t(M * p.K * 2)), y(size_t(M * p.N * 4)), gu(size_t(M * p.N * 2));
        fill_random(s, x, 99);
        auto wp = [&](int i) { return w[size_t(i % copies)].ptr(); };
        const bool y_f32 = p.out == Out::kF32;
        double lt_us = NAN, gemv_us = NAN;
        if (lt.available())
          lt_us = median_us(s, [&](int i) {
            if (p.out == Out::kSwiGLU) {
              lt.matmul(s.get(), x.ptr(), M, p.K, wp(i), p.N, gu.ptr(), false);
              ops.silu_mul(s.get(), gu.ptr(), gu.ptr() + CUdeviceptr(out_n * 2), M, out_n, p.N, y.ptr());
            } else {
              lt.matmul(s.get(), x.ptr(), M, p.K, wp(i), p.N, y.ptr(), y_f32);
            }
          });
        if (M <= 16)
          gemv_us = median_us(s, [&](int i) {
            if (p.out == Out::kSwiGLU) ops.gemv_swiglu(s.get(), x.ptr(), M, p.K, wp(i), out_n, y.ptr());
            else ops.gemv(s.get(), x.ptr(), M, p.K, wp(i), p.N, 0, y.ptr(), y_f32);
          });
        if (!std::isnan(gemv_us)) gemv_times[M][&p] = gemv_us;
        double best = INFINITY;
        std::string best_label;
        nlohmann::json tiles = nlohmann::json::object();
        for (const Candidate &c : cands) {
          const auto &t = TensorGemm::kTiles[c.tile];
          // (tiles far from this M: a 128-row tile on a decode batch, a 16-row one on a long prompt)
          if ((M <= 32 && t.bm >= 128) || (M >= 1024 && t.bm <= 32)) continue;
          const TensorGemm::Choice ch = gemm.with_splits(c.tile, M, p.N, p.K, p.out, c.blocks_per_sm * ctx.sm_count());
          if (c.blocks_per_sm && ch.splits == 1) continue;  // the same launch as no split
          const double us = median_us(s, [&](int i) { gemm.run(s.get(), x.ptr(), M, p.K, wp(i), p.N, 0, y.ptr(), p.out, ch); });
          tiles[c.label()] = us;
          times[M][c.label()][&p] = us;
          if (us < best) best = us, best_label = c.label();
        }
        best_times[M][&p] = best;
        const TensorGemm::Choice chosen = gemm.choose(M, p.N, p.K, p.out);
        const double table_us = median_us(s, [&](int i) { gemm.run(s.get(), x.ptr(), M, p.K, wp(i), p.N, 0, y.ptr(), p.out); });
        const std::string table_label = std::string(TensorGemm::kTiles[chosen.tile].name) +
                                        (chosen.splits > 1 ? "/x" + std::to_string(chosen.splits) : "");
        const double flops = 2.0 * double(M) * double(p.N) * double(p.K);
        std::printf("%-14s %6lld %10.1f %10.1f %10.1f %-22s %10.1f %-22s %8.3f %8.1f %8.0f\n", p.name, (long long)M,
                    lt_us, gemv_us, table_us, table_label.c_str(), best, best_label.c_str(), lt_us / best,
                    flops / best * 1e-6, double(wbytes) / best * 1e-3);
        std::fflush(stdout);
        rows.push_back({{"product", p.name}, {"M", M}, {"K", p.K}, {"N", p.N}, {"out", out_name(p.out)},
                        {"cublaslt_us", std::isnan(lt_us) ? nlohmann::json() : nlohmann::json(lt_us)},
                        {"gemv_us", std::isnan(gemv_us) ? nlohmann::json() : nlohmann::json(gemv_us)},
                        {"table_us", table_us}, {"table_tile", table_label}, {"tiles", tiles}});
      }
    }

    // The table: per M, each product's fastest candidate (gemm_table.h's shapes). The GEMV keeps the rows from 1 up
    // while its step time is the least: per model, its products' time (each times its layers) over the per-product
    // best's, summed over the two models (2 is the least). Printed with each M's step times beside cuBLASLt's.
    std::printf("\n// bench_cuda_gemm on %s (cc %d), %s: per M, the step's products (each times its layers) on the fastest "
                "tile per product, on the GEMV, and on cuBLASLt\n",
                ctx.name().c_str(), ctx.compute_capability(), bench_date().c_str());
    auto step = [&](int model, const std::map<const Product *, double> &t) {
      double sum = 0;
      for (const auto &[p, us] : t)
        if (p->model == model) sum += p->count * us;
      return sum;
    };
    int64_t gemv_rows = 0;
    bool gemv_run = true;
    for (int64_t M : ms) {
      const auto &best = best_times[M], &gemv = gemv_times[M];
      double gemv_score = gemv.size() == best.size() ? 0 : INFINITY;
      std::string line;
      for (int model = 0; model < 2; ++model) {
        const double b = step(model, best), g = step(model, gemv);
        if (b > 0 && std::isfinite(gemv_score)) gemv_score += g / b;
        char buf[160];
        std::snprintf(buf, sizeof buf, "  %s %.0f us (gemv %.2fx)", model ? "8B" : "0.6B", b, g > 0 ? g / b : NAN);
        line += buf;
      }
      if (gemv_run && gemv_score <= 2.0) gemv_rows = M;
      else gemv_run = false;
      std::printf("//   M %5lld:%s\n", (long long)M, line.c_str());
    }
    std::printf("// gemv_rows %lld\n// shapes (M, N, K, out, tile, split-K blocks per SM):\n", (long long)gemv_rows);
    for (int64_t M : ms) {
      if (M <= gemv_rows) continue;
      for (const Product &p : kProducts) {
        std::string label;
        double us = INFINITY;
        for (const auto &[l, t] : times[M])
          if (const auto it = t.find(&p); it != t.end() && it->second < us) us = it->second, label = l;
        if (label.empty()) continue;
        const size_t cut = label.find("/sk");
        const std::string tile = label.substr(0, cut), sk = cut == std::string::npos ? "0" : label.substr(cut + 3);
        std::printf("    {%lld, %lld, %lld, %d, \"%s\", %s},  // %s\n", (long long)M, (long long)p.N, (long long)p.K,
                    int(p.out), tile.c_str(), sk.c_str(), p.name);
      }
    }
    if (!json_path.empty()) {
      nlohmann::json j = {{"meta", bench_meta()}, {"date", bench_date()}, {"gpu", ctx.name()},
                          {"cc", ctx.compute_capability()}, {"copy_gbs", copy_gbs}, {"peak_tflops", peak_tflops},
                          {"cublaslt", lt.available() ? lt.library() : ""}, {"rows", rows}};
      std::ofstream(json_path) << j.dump(1) << "\n";
    }
  } catch (const std::exception &e) {
    std::printf("bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
