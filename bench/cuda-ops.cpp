// Timing harness for the CUDA ops on one GPU, with the device's own copy rate measured in the same run as
// the ceiling: the decode GEMV (bf16 weights, M = 1) on Qwen3-8B's shapes and the lm_head, and paged decode
// attention for reference. Each figure is the median of many launches, each bracketed by its own pair of CUDA
// events, all enqueued back to back. Weights are random bf16 (never zeros: they can run faster than real data),
// rotated over enough copies that each launch streams from DRAM rather than the 60 MB L2.
//
//   bench/cuda-ops [--reps N]      prints a table; exit 0 when it ran, 1 on a CUDA error, 0 + "skipped" without CUDA
// Built by `scripts/gpu-check.sh prepare`; run by `scripts/gpu-check.sh` on the GPU machine.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"

using namespace vt;
using namespace vt::cuda;

namespace {

int g_reps = 200;

struct Row {
  std::string op, shape;
  double us, bytes;  // median time per launch, bytes that must move per launch
};
std::vector<Row> g_rows;

// Fills `bytes` of device memory with pseudo-random bf16 in [-1, 1): one random 64 MiB tile from the host,
// repeated with device copies.
void fill_random(Stream &s, DeviceBuffer &b, uint64_t seed) {
  const size_t tile = std::min<size_t>(b.bytes(), 64u << 20) & ~size_t(1);
  std::vector<uint16_t> host(tile / 2);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto &h : host) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float f = float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 23);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    h = uint16_t(u >> 16);
  }
  b.upload(s.get(), host.data(), tile);
  for (size_t off = tile; off < b.bytes(); off += tile)
    check(driver().cuMemcpyDtoDAsync(b.ptr() + off, b.ptr(), std::min(tile, b.bytes() - off), s.get()), "tile copy");
  s.synchronize();
}

// Median of g_reps timed calls of fn(i).
template <class F>
double median_us(Stream &s, F fn) {
  for (int i = 0; i < 5; ++i) fn(i);  // warm-up
  std::vector<Event> ev(size_t(2 * g_reps));
  for (int i = 0; i < g_reps; ++i) {
    ev[size_t(2 * i)].record(s.get());
    fn(i);
    ev[size_t(2 * i + 1)].record(s.get());
  }
  s.synchronize();
  std::vector<double> t(static_cast<size_t>(g_reps));
  for (int i = 0; i < g_reps; ++i) t[size_t(i)] = 1e3 * Event::elapsed_ms(ev[size_t(2 * i)], ev[size_t(2 * i + 1)]);
  std::nth_element(t.begin(), t.begin() + g_reps / 2, t.end());
  return t[size_t(g_reps / 2)];
}

double bench_copy(Stream &s) {
  const size_t bytes = size_t(1) << 30;
  DeviceBuffer a(bytes), b(bytes);
  a.fill_bytes(s.get(), 0x5a);
  const double us = median_us(s, [&](int) {
    check(driver().cuMemcpyDtoDAsync(b.ptr(), a.ptr(), bytes, s.get()), "cuMemcpyDtoDAsync");
  });
  g_rows.push_back({"device copy (read + write)", "1 GiB", us, 2.0 * bytes});
  return 2.0 * bytes / us * 1e-3;  // GB/s
}

void bench_gemv(Context &ctx, Stream &s, Ops &ops, int64_t M, int64_t K, int64_t N, bool y_f32, const char *what) {
  const size_t wbytes = size_t(N * K * 2);
  const int copies = int(std::max<size_t>(2, (size_t(1) << 30) / wbytes + 1));  // >= 1 GiB in rotation
  std::vector<DeviceBuffer> w;
  for (int c = 0; c < copies; ++c) {
    w.emplace_back(wbytes);
    fill_random(s, w.back(), uint64_t(c + 1));
  }
  DeviceBuffer x(size_t(M * K * 2)), y(size_t(M * N * 4));
  fill_random(s, x, 99);
  const double us = median_us(s, [&](int i) {
    ops.gemv(s.get(), x.ptr(), M, K, w[size_t(i % copies)].ptr(), N, 0, y.ptr(), y_f32);
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "M=%lld K=%lld N=%lld", (long long)M, (long long)K, (long long)N);
  g_rows.push_back({what, shape, us, double(wbytes) + double(M * K * 2) + double(M * N * (y_f32 ? 4 : 2))});
  (void)ctx;
}

void bench_attention(Stream &s, Ops &ops, int32_t batch, int32_t ctx_len) {
  const int32_t n_heads = 32, n_kv = 8, hd = 128, bs = 16;
  const int32_t blocks_per_seq = (ctx_len + bs - 1) / bs, n_blocks = batch * blocks_per_seq;
  const size_t cache_bytes = size_t(n_blocks) * bs * n_kv * hd * 2;
  DeviceBuffer kc(cache_bytes), vc(cache_bytes), q(size_t(batch) * n_heads * hd * 2), out(q.bytes());
  fill_random(s, kc, 7);
  fill_random(s, vc, 8);
  fill_random(s, q, 9);
  std::vector<int32_t> q_start(size_t(batch) + 1), pos0(size_t(batch), ctx_len - 1), tables(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i <= batch; ++i) q_start[size_t(i)] = i;
  for (int32_t i = 0; i < n_blocks; ++i) tables[size_t(i)] = int32_t((int64_t(i) * 7919) % n_blocks);  // scattered
  DeviceBuffer dq(q_start.size() * 4), dp(pos0.size() * 4), dt(tables.size() * 4);
  dq.upload(s.get(), q_start.data(), dq.bytes());
  dp.upload(s.get(), pos0.data(), dp.bytes());
  dt.upload(s.get(), tables.data(), dt.bytes());
  DeviceAttentionBatch b{batch, dq.ptr(), dp.ptr(), dt.ptr(), blocks_per_seq, bs};
  const double us = median_us(s, [&](int) {
    ops.attention(s.get(), q.ptr(), kc.ptr(), vc.ptr(), b, batch, n_heads, n_kv, hd, 0.088f, out.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "batch %d x ctx %d, 32/8 heads x 128", batch, ctx_len);
  g_rows.push_back({"paged attention decode bf16", shape, us, double(cache_bytes)});
}

}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::max(11, std::atoi(argv[++i]));
  const auto avail = cuda_available();
  if (!avail.ok) {
    std::printf("skipped: %s\n", avail.reason.c_str());
    return 0;
  }
  try {
    Context ctx;
    Stream s;
    Ops ops(ctx, Act::BF16);
    std::printf("cuda-ops bench: %s (cc %d, %d SMs, %lld MiB L2), driver %d, median of %d launches each\n",
                ctx.name().c_str(), ctx.compute_capability(), ctx.sm_count(), (long long)(ctx.l2_bytes() >> 20),
                avail.driver_version, g_reps);
    const double copy_gbs = bench_copy(s);
    bench_gemv(ctx, s, ops, 1, 4096, 12288, false, "gemv bf16 (qkv / gate_up)");
    bench_gemv(ctx, s, ops, 1, 12288, 4096, false, "gemv bf16 (down_proj)");
    bench_gemv(ctx, s, ops, 1, 4096, 151936, true, "gemv bf16 -> f32 (lm_head)");
    bench_gemv(ctx, s, ops, 4, 4096, 12288, false, "gemv bf16, 4 rows");
    bench_gemv(ctx, s, ops, 8, 4096, 12288, false, "gemv bf16, 8 rows");
    bench_attention(s, ops, 1, 4096);
    bench_attention(s, ops, 32, 4096);
    ctx.synchronize();

    std::printf("\n%-30s %-36s %10s %9s %8s\n", "op", "shape", "median us", "GB/s", "of copy");
    for (const Row &r : g_rows) {
      const double gbs = r.bytes / r.us * 1e-3;
      std::printf("%-30s %-36s %10.1f %9.0f %7.1f%%\n", r.op.c_str(), r.shape.c_str(), r.us, gbs, 100.0 * gbs / copy_gbs);
    }
  } catch (const std::exception &e) {
    std::printf("bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
