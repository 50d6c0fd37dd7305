// Timing harness for the CUDA ops on one GPU, with the device's own copy rate measured in the same run as
// the ceiling: the decode GEMV (bf16 weights, M = 1) on Qwen3-8B's shapes and the lm_head, and paged decode
// attention for reference. Each figure is the median of many launches, each bracketed by its own pair of CUDA
// events, all enqueued back to back. Weights are random bf16 (never zeros: they can run faster than real data),
// rotated over enough copies that each launch streams from DRAM rather than the 60 MB L2.
// Every decode product of Qwen3-8B and Qwen3-0.6B (fused q|k|v and gate|up) and the fused SwiGLU product.
// Also the decode step's rope + KV store in one launch (next to the three it replaces) and greedy sampling on
// the GPU (argmax + logprob over 151,936 fp32 logits per row); sampling with temperature, top-k, top-p and
// min-p, the top-20 logprobs and the logits processors on the same rows (GB/s counts one read of the logits).
// Split-K decode attention (attention_decode) on Qwen3-8B's and 0.6B's shapes, K and V read from DRAM.
// Prefill-shaped bf16 products go in a second table, in TFLOP/s: cuBLASLt (when the machine has it) on
// Qwen3-8B's shapes, and our tiled gemm on one of them for comparison.
// Prefill attention (tensor cores; and the CUDA-core kernel once, for comparison) goes in a third, in TFLOP/s of
// causal work.
//
//   bench/cuda-ops [--reps N]      prints a table; exit 0 when it ran, 1 on a CUDA error, 0 + "skipped" without CUDA
// Built by `scripts/gpu-check.sh prepare`; run by `scripts/gpu-check.sh` on the GPU machine.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_ops.h"
#include "cuda_bench.h"

using namespace vt;
using namespace vt::cuda;

namespace {

int g_reps = 200;

struct Row {
  std::string op, shape;
  double us, bytes;  // median time per launch, bytes that must move per launch
};
std::vector<Row> g_rows;

// Compute-bound products: figures in TFLOP/s rather than GB/s.
struct FlopRow {
  std::string op, shape;
  double us, flops;  // median time per launch, 2·M·N·K
};
std::vector<FlopRow> g_flop_rows;

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

// Enough random copies of a weight matrix of wbytes that launches rotating over them read >= 1 GiB before one
// comes back: every launch then streams its weights from DRAM, not from the 60 MiB L2.
std::vector<DeviceBuffer> rotated_weights(Stream &s, size_t wbytes) {
  const int copies = int(std::max<size_t>(2, (size_t(1) << 30) / wbytes + 1));
  std::vector<DeviceBuffer> w;
  for (int c = 0; c < copies; ++c) {
    w.emplace_back(wbytes);
    fill_random(s, w.back(), uint64_t(c + 1));
  }
  return w;
}

void bench_gemv(Context &ctx, Stream &s, Ops &ops, int64_t M, int64_t K, int64_t N, bool y_f32, const char *what) {
  const size_t wbytes = size_t(N * K * 2);
  const std::vector<DeviceBuffer> w = rotated_weights(s, wbytes);
  const int copies = int(w.size());
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

// SwiGLU's gated product over one gate_up(2I, K) matrix: y(M, I) = silu(x · gateᵀ) ⊙ (x · upᵀ), bf16 in and out,
// the weights rotated over >= 1 GiB of copies as for bench_gemv.
void bench_gemv_swiglu(Stream &s, Ops &ops, int64_t M, int64_t K, int64_t I, const char *what) {
  const size_t wbytes = size_t(2 * I * K * 2);
  const std::vector<DeviceBuffer> w = rotated_weights(s, wbytes);
  const int copies = int(w.size());
  DeviceBuffer x(size_t(M * K * 2)), y(size_t(M * I * 2));
  fill_random(s, x, 99);
  const double us = median_us(s, [&](int i) {
    ops.gemv_swiglu(s.get(), x.ptr(), M, K, w[size_t(i % copies)].ptr(), I, y.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "M=%lld K=%lld I=%lld", (long long)M, (long long)K, (long long)I);
  g_rows.push_back({what, shape, us, double(wbytes) + double(M * K * 2) + double(M * I * 2)});
}

// A decode batch's integers on the device: `batch` sequences of one query row each at position ctx_len - 1, their
// blocks (bs tokens each) scattered over the pool as a long-running server's are.
struct DecodeMeta {
  DeviceBuffer q_start, pos0, tables;
  DeviceAttentionBatch batch;
};
DecodeMeta decode_meta(Stream &s, int32_t batch, int32_t ctx_len, int32_t bs) {
  const int32_t blocks_per_seq = (ctx_len + bs - 1) / bs, n_blocks = batch * blocks_per_seq;
  std::vector<int32_t> q_start(size_t(batch) + 1), pos0(size_t(batch), ctx_len - 1), tables(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i <= batch; ++i) q_start[size_t(i)] = i;
  for (int32_t i = 0; i < n_blocks; ++i) tables[size_t(i)] = int32_t((int64_t(i) * 7919) % n_blocks);  // scattered
  DecodeMeta m{DeviceBuffer(q_start.size() * 4), DeviceBuffer(pos0.size() * 4), DeviceBuffer(tables.size() * 4), {}};
  m.q_start.upload(s.get(), q_start.data(), m.q_start.bytes());
  m.pos0.upload(s.get(), pos0.data(), m.pos0.bytes());
  m.tables.upload(s.get(), tables.data(), m.tables.bytes());
  m.batch = DeviceAttentionBatch{batch, m.q_start.ptr(), m.pos0.ptr(), m.tables.ptr(), blocks_per_seq, bs};
  return m;
}


void bench_attention(Stream &s, Ops &ops, int32_t batch, int32_t ctx_len) {
  const int32_t n_heads = 32, n_kv = 8, hd = 128, bs = 16;
  const int32_t blocks_per_seq = (ctx_len + bs - 1) / bs, n_blocks = batch * blocks_per_seq;
  const size_t cache_bytes = size_t(n_blocks) * bs * n_kv * hd * 2;
  DeviceBuffer kc(cache_bytes), vc(cache_bytes), q(size_t(batch) * n_heads * hd * 2), out(q.bytes());
  fill_random(s, kc, 7);
  fill_random(s, vc, 8);
  fill_random(s, q, 9);
  const DecodeMeta meta = decode_meta(s, batch, ctx_len, bs);
  const DeviceAttentionBatch &b = meta.batch;
  const double us = median_us(s, [&](int) {
    ops.attention(s.get(), q.ptr(), kc.ptr(), vc.ptr(), b, batch, n_heads, n_kv, hd, 0.088f, out.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "batch %d x ctx %d, 32/8 heads x 128", batch, ctx_len);
  g_rows.push_back({"paged attention decode bf16", shape, us, double(cache_bytes)});
}

// Split-K decode attention (attention_decode) at head_dim 128, blocks of 16, every row at ctx_len keys, under a
// max_keys bound of ctx_len or (the captured-graph case) `bound`. Bytes: the K and V rows read. The caches are
// rotated over enough copies (one buffer each for K and V) that every launch reads from DRAM, not L2.
void bench_attention_decode(Stream &s, Ops &ops, int32_t n_heads, int32_t n_kv, int32_t batch, int32_t ctx_len,
                            int32_t bound = 0) {
  const int32_t hd = 128, bs = 16;
  const int32_t blocks_per_seq = (ctx_len + bs - 1) / bs, n_blocks = batch * blocks_per_seq;
  const size_t cache_bytes = size_t(n_blocks) * bs * n_kv * hd * 2;
  const size_t copies = std::max<size_t>(2, (size_t(512) << 20) / cache_bytes + 1);
  DeviceBuffer kc(copies * cache_bytes), vc(copies * cache_bytes), q(size_t(batch) * n_heads * hd * 2), out(q.bytes());
  fill_random(s, kc, 27);
  fill_random(s, vc, 28);
  fill_random(s, q, 29);
  const DecodeMeta meta = decode_meta(s, batch, ctx_len, bs);
  const DeviceAttentionBatch &b = meta.batch;
  const int32_t max_keys = bound ? bound : ctx_len;
  const size_t ws_bytes = ops.attention_workspace_bytes(batch, n_heads, n_kv, hd, max_keys);
  DeviceBuffer ws(ws_bytes), tickets(Ops::attention_tickets_bytes(batch, n_kv));
  tickets.fill_bytes(s.get(), 0);  // the tickets start at zero; every call leaves them so
  const float scale = 1.0f / std::sqrt(float(hd));
  const double us = median_us(s, [&](int i) {
    const CUdeviceptr off = CUdeviceptr((size_t(i) % copies) * cache_bytes);
    ops.attention_decode(s.get(), q.ptr(), 0, kc.ptr() + off, vc.ptr() + off, b, batch, n_heads, n_kv, hd, scale,
                         max_keys, tickets.ptr(), ws.ptr(), ws_bytes, out.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "b%d x ctx %d, %d/%dx128, %d splits%s", batch, ctx_len, n_heads, n_kv,
                ops.attention_splits(batch, n_kv, max_keys), bound ? ", bound 40k" : "");
  const double kv_bytes = 2.0 * double(batch) * ctx_len * n_kv * hd * 2;
  g_rows.push_back({"attention_decode bf16", shape, us, kv_bytes});
}

// Prefill attention, Qwen3-8B's shape (32 q heads, 8 kv heads, head_dim 128, blocks of 16): one sequence of
// `rows` rows from position 0, on tensor cores (attention_prefill) or, for comparison, through the CUDA-core
// kernel (attention). FLOPs count the causal work only: 2 · 2 · heads · head_dim per (row, visible key) pair.
std::vector<FlopRow> g_attention_rows;
void bench_attention_prefill(Stream &s, Ops &ops, int32_t rows, bool tensor_cores) {
  const int32_t n_heads = 32, n_kv = 8, hd = 128, bs = 16;
  const int32_t n_blocks = (rows + bs - 1) / bs;
  const size_t cache_bytes = size_t(n_blocks) * bs * n_kv * hd * 2;
  DeviceBuffer kc(cache_bytes), vc(cache_bytes), q(size_t(rows) * n_heads * hd * 2), out(q.bytes());
  fill_random(s, kc, 17);
  fill_random(s, vc, 18);
  fill_random(s, q, 19);
  std::vector<int32_t> q_start = {0, rows}, pos0 = {0}, tables(static_cast<size_t>(n_blocks)), tiles;
  for (int32_t i = 0; i < n_blocks; ++i) tables[size_t(i)] = int32_t((int64_t(i) * 7919) % n_blocks);  // scattered
  const int32_t n_tiles = Ops::prefill_tiles(q_start.data(), 1, &tiles, pos0.data());
  DeviceBuffer dq(q_start.size() * 4), dp(pos0.size() * 4), dt(tables.size() * 4), dtiles(tiles.size() * 4);
  dq.upload(s.get(), q_start.data(), dq.bytes());
  dp.upload(s.get(), pos0.data(), dp.bytes());
  dt.upload(s.get(), tables.data(), dt.bytes());
  dtiles.upload(s.get(), tiles.data(), dtiles.bytes());
  DeviceAttentionBatch b{1, dq.ptr(), dp.ptr(), dt.ptr(), n_blocks, bs};
  const float scale = 1.0f / std::sqrt(float(hd));
  const double us = median_us(s, [&](int) {
    if (tensor_cores)
      ops.attention_prefill(s.get(), q.ptr(), 0, kc.ptr(), vc.ptr(), b, rows, n_heads, n_kv, hd, scale, dtiles.ptr(),
                            n_tiles, out.ptr());
    else
      ops.attention(s.get(), q.ptr(), kc.ptr(), vc.ptr(), b, rows, n_heads, n_kv, hd, scale, out.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "%d rows from 0, 32/8 heads x 128", rows);
  g_attention_rows.push_back({tensor_cores ? "prefill bf16, tensor cores" : "prefill bf16, CUDA-core kernel", shape,
                              us, 4.0 * n_heads * hd * double(rows) * (double(rows) + 1) / 2});
}

// y(M, N) = x(M, K) · w(N, K)ᵀ, bf16 in and out: through cuBLASLt, or through our tiled gemm when lt is null.
// Each weight matrix is larger than L2 or the product is compute-bound, so one copy of w is enough.
void bench_product(Stream &s, Ops &ops, CublasLt *lt, int64_t M, int64_t K, int64_t N, const char *what) {
  DeviceBuffer w(size_t(N * K * 2)), x(size_t(M * K * 2)), y(size_t(M * N * 2));
  fill_random(s, w, 5);
  fill_random(s, x, 6);
  const double us = median_us(s, [&](int) {
    if (lt) lt->matmul(s.get(), x.ptr(), M, K, w.ptr(), N, y.ptr(), false);
    else ops.gemm(s.get(), x.ptr(), M, K, w.ptr(), DType::BF16, N, 0, y.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "M=%lld K=%lld N=%lld", (long long)M, (long long)K, (long long)N);
  g_flop_rows.push_back({what, shape, us, 2.0 * double(M) * double(N) * double(K)});
}

// One layer's rope + KV store for T tokens, Qwen3-8B's shape (32 q heads, 8 kv heads, head_dim 128, q/k
// norms): rope_store over a fused qkv, or the three launches it replaces (rope on q, rope on k, kv_store from
// separate k and v). Bytes: qkv read, its q and k heads written back, k and v written to the cache.
void bench_rope_store(Stream &s, Ops &ops, int64_t T, bool fused) {
  const int32_t n_heads = 32, n_kv = 8, hd = 128;
  const int64_t width = int64_t(n_heads + 2 * n_kv) * hd, kvw = int64_t(n_kv) * hd, n_slots = 4096;
  DeviceBuffer qkv(size_t(T * width * 2)), k(size_t(T * kvw * 2)), v(k.bytes()), kc(size_t(n_slots * kvw * 2)),
      vc(kc.bytes());
  fill_random(s, qkv, 21);
  fill_random(s, k, 22);
  fill_random(s, v, 23);
  std::vector<int32_t> pos(static_cast<size_t>(T)), slot(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(1000 + t), slot[size_t(t)] = int32_t((t * 7919) % n_slots);
  std::vector<float> inv_freq(size_t(hd / 2)), norm(size_t(hd), 1.f);
  for (int i = 0; i < hd / 2; ++i) inv_freq[size_t(i)] = float(std::pow(1e6, -2.0 * i / hd));
  DeviceBuffer dpos(pos.size() * 4), dslot(slot.size() * 4), dfreq(inv_freq.size() * 4), dnorm(norm.size() * 4);
  dpos.upload(s.get(), pos.data(), dpos.bytes());
  dslot.upload(s.get(), slot.data(), dslot.bytes());
  dfreq.upload(s.get(), inv_freq.data(), dfreq.bytes());
  dnorm.upload(s.get(), norm.data(), dnorm.bytes());
  const double us = median_us(s, [&](int) {
    if (fused) {
      ops.rope_store(s.get(), qkv.ptr(), T, n_heads, n_kv, hd, dpos.ptr(), dfreq.ptr(), 1.f, dnorm.ptr(), dnorm.ptr(),
                     1e-6f, dslot.ptr(), kc.ptr(), vc.ptr());
    } else {
      ops.rope(s.get(), qkv.ptr(), T, n_heads, hd, width, dpos.ptr(), dfreq.ptr(), 1.f, dnorm.ptr(), 1e-6f);
      ops.rope(s.get(), qkv.ptr() + CUdeviceptr(n_heads * hd * 2), T, n_kv, hd, width, dpos.ptr(), dfreq.ptr(), 1.f,
               dnorm.ptr(), 1e-6f);
      ops.kv_store(s.get(), k.ptr(), v.ptr(), T, n_kv, hd, dslot.ptr(), kc.ptr(), vc.ptr());
    }
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "T=%lld, 32/8 heads x 128, qk norm", (long long)T);
  g_rows.push_back({fused ? "rope_store bf16" : "rope+rope+kv_store, 3 launches", shape, us,
                    double(T) * double(width + (n_heads + n_kv) * hd + 2 * kvw) * 2});
}

// Greedy sampling (argmax + its logprob) over n rows of Qwen3's 151,936 fp32 logits, rotated over >= 1 GiB of
// copies so each launch reads from DRAM (right after the lm_head, small batches' logits may still be in L2).
void bench_argmax(Stream &s, Ops &ops, int64_t n) {
  const int64_t vocab = 151936;
  const size_t bytes = size_t(n * vocab * 4);
  const int copies = int(std::max<size_t>(2, (size_t(1) << 30) / bytes + 1));
  DeviceBuffer logits(bytes * size_t(copies)), ids(size_t(n * 4)), lps(size_t(n * 4));
  fill_random(s, logits, 31);
  const double us = median_us(s, [&](int i) {
    ops.argmax(s.get(), logits.ptr() + CUdeviceptr(size_t(i % copies) * bytes), n, vocab, 0, ids.ptr(), lps.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "n=%lld x vocab %lld, fp32", (long long)n, (long long)vocab);
  g_rows.push_back({"argmax + logprob (greedy)", shape, us, double(bytes)});
}

// n rows of 151,936 fp32 logits shaped like a language model's next token (normal(0, 2) with 20 ids raised to
// 14 .. 4.5 above it: ~30% of the mass left spread over the vocabulary), or flat (normal(0, 0.5): the draw
// walks a large part of the vocabulary), rotated over >= 1 GiB of device copies so each launch reads DRAM.
struct LogitsRotation {
  DeviceBuffer buf;
  size_t bytes = 0;  // one copy
  int copies = 0;
  CUdeviceptr at(int i) const { return buf.ptr() + CUdeviceptr(size_t(i % copies) * bytes); }
};
LogitsRotation make_logits(Stream &s, int64_t n, int64_t vocab, bool flat) {
  std::mt19937_64 g(42);
  std::normal_distribution<float> normal(0.f, flat ? 0.5f : 2.f);
  std::vector<float> host(size_t(n * vocab));
  for (float &v : host) v = normal(g);
  if (!flat)
    for (int64_t r = 0; r < n; ++r)
      for (int i = 0; i < 20; ++i) host[size_t(r * vocab + (i * 104729 + r * 7919) % vocab)] += 14.f - 0.5f * float(i);
  LogitsRotation rot;
  rot.bytes = host.size() * 4;
  rot.copies = int(std::max<size_t>(2, (size_t(1) << 30) / rot.bytes + 1));
  rot.buf = DeviceBuffer(rot.bytes * size_t(rot.copies));
  rot.buf.upload(s.get(), host.data(), rot.bytes);
  for (int c = 1; c < rot.copies; ++c)
    check(driver().cuMemcpyDtoDAsync(rot.at(c), rot.at(0), rot.bytes, s.get()), "logits copy");
  s.synchronize();
  return rot;
}

// Ops::sample over n rows, every row with the same parameters (u differs per row).
void bench_sample(Stream &s, Ops &ops, int64_t n, bool flat, float t, int32_t top_k, float top_p, float min_p,
                  const char *what) {
  const int64_t vocab = 151936;
  const LogitsRotation rot = make_logits(s, n, vocab, flat);
  std::vector<SampleRow> rows(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) rows[size_t(r)] = {double(r + 1) / double(n + 2), t, top_k, top_p, min_p};
  DeviceBuffer dr(rows.size() * sizeof(SampleRow)), ids(size_t(n * 4)), lps(size_t(n * 4));
  dr.upload(s.get(), rows.data(), dr.bytes());
  const double us = median_us(s, [&](int i) {
    ops.sample(s.get(), rot.at(i), n, vocab, 0, dr.ptr(), ids.ptr(), lps.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "n=%lld x vocab %lld%s", (long long)n, (long long)vocab, flat ? ", flat" : "");
  g_rows.push_back({what, shape, us, double(rot.bytes)});
}

void bench_top_logprobs(Stream &s, Ops &ops, int64_t n) {
  const int64_t vocab = 151936;
  const LogitsRotation rot = make_logits(s, n, vocab, false);
  DeviceBuffer ids(size_t(n * 20 * 4)), lps(ids.bytes());
  const double us = median_us(s, [&](int i) {
    ops.top_logprobs(s.get(), rot.at(i), n, vocab, 0, 20, ids.ptr(), lps.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "n=%lld x vocab %lld, top 20", (long long)n, (long long)vocab);
  g_rows.push_back({"top_logprobs", shape, us, double(rot.bytes)});
}

// Ops::apply_penalties in place on n rows: 600 distinct seen ids (half of them in the output) and 16 biases per
// row, all three penalties on. Applied to the same rows every launch (the values drift; the time does not).
void bench_penalties(Stream &s, Ops &ops, int64_t n) {
  const int64_t vocab = 151936;
  const LogitsRotation rot = make_logits(s, n, vocab, false);
  std::vector<int32_t> seen_off{0}, seen_ids, seen_counts, bias_off{0}, bias_ids;
  std::vector<float> bias_values;
  for (int64_t r = 0; r < n; ++r) {
    for (int j = 0; j < 600; ++j) seen_ids.push_back(int32_t((j * 251 + r * 13) % vocab)), seen_counts.push_back(j % 2 ? j % 5 : 0);
    for (int j = 0; j < 16; ++j) bias_ids.push_back(int32_t((j * 9973 + r) % vocab)), bias_values.push_back(-1.f);
    seen_off.push_back(int32_t(seen_ids.size())), bias_off.push_back(int32_t(bias_ids.size()));
  }
  const std::vector<PenaltyRow> rows(static_cast<size_t>(n), PenaltyRow{1.1f, 0.5f, 0.2f});
  auto upload = [&](const auto &v) {
    DeviceBuffer b(v.size() * sizeof(v[0]));
    b.upload(s.get(), v.data(), b.bytes());
    return b;
  };
  DeviceBuffer dr = upload(rows), dso = upload(seen_off), dsi = upload(seen_ids), dsc = upload(seen_counts),
               dbo = upload(bias_off), dbi = upload(bias_ids), dbv = upload(bias_values);
  const double us = median_us(s, [&](int i) {
    ops.apply_penalties(s.get(), rot.at(i), n, vocab, 0, dr.ptr(), dso.ptr(),
                        dsi.ptr(), dsc.ptr(), dbo.ptr(), dbi.ptr(), dbv.ptr());
  });
  char shape[96];
  std::snprintf(shape, sizeof shape, "n=%lld, 600 seen + 16 biased ids/row", (long long)n);
  g_rows.push_back({"apply_penalties", shape, us, double(n) * 616 * 8});
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
    // Qwen3-8B's and Qwen3-0.6B's decode products, q|k|v and gate|up fused as the engine stores them (the 8B
    // lm_head is the row above); gate_up also as the fused SwiGLU product, and at 8 rows
    bench_gemv(ctx, s, ops, 1, 4096, 6144, false, "gemv 8B qkv");
    bench_gemv(ctx, s, ops, 1, 4096, 4096, false, "gemv 8B o_proj");
    bench_gemv(ctx, s, ops, 1, 4096, 24576, false, "gemv 8B gate_up");
    bench_gemv_swiglu(s, ops, 1, 4096, 12288, "gemv_swiglu 8B gate_up");
    bench_gemv(ctx, s, ops, 1, 12288, 4096, false, "gemv 8B down_proj");
    bench_gemv(ctx, s, ops, 8, 4096, 24576, false, "gemv 8B gate_up, 8 rows");
    bench_gemv_swiglu(s, ops, 8, 4096, 12288, "gemv_swiglu 8B gate_up, 8 rows");
    bench_gemv(ctx, s, ops, 1, 1024, 4096, false, "gemv 0.6B qkv");
    bench_gemv(ctx, s, ops, 1, 2048, 1024, false, "gemv 0.6B o_proj");
    bench_gemv(ctx, s, ops, 1, 1024, 6144, false, "gemv 0.6B gate_up");
    bench_gemv_swiglu(s, ops, 1, 1024, 3072, "gemv_swiglu 0.6B gate_up");
    bench_gemv(ctx, s, ops, 1, 3072, 1024, false, "gemv 0.6B down_proj");
    bench_gemv(ctx, s, ops, 1, 1024, 151936, true, "gemv 0.6B lm_head -> f32");
    bench_attention(s, ops, 1, 4096);
    bench_attention(s, ops, 32, 4096);
    // split-K decode attention: Qwen3-8B (32/8 heads) and Qwen3-0.6B (16/8) shapes; GB/s counts K and V
    bench_attention_decode(s, ops, 32, 8, 1, 384);
    bench_attention_decode(s, ops, 32, 8, 1, 384, 40960);
    bench_attention_decode(s, ops, 32, 8, 1, 4096);
    bench_attention_decode(s, ops, 32, 8, 32, 4096);
    bench_attention_decode(s, ops, 32, 8, 128, 384);
    bench_attention_decode(s, ops, 16, 8, 1, 384);
    bench_rope_store(s, ops, 1, true);
    bench_rope_store(s, ops, 1, false);
    bench_rope_store(s, ops, 128, true);
    bench_rope_store(s, ops, 128, false);
    bench_argmax(s, ops, 1);
    bench_argmax(s, ops, 128);
    bench_sample(s, ops, 1, false, 0.8f, 0, 0.95f, 0.f, "sample T 0.8 top-p 0.95");
    bench_sample(s, ops, 128, false, 0.8f, 0, 0.95f, 0.f, "sample T 0.8 top-p 0.95");
    bench_sample(s, ops, 1, false, 0.7f, 40, 0.9f, 0.05f, "sample T .7 k 40 p .9 min-p .05");
    bench_sample(s, ops, 128, false, 0.7f, 40, 0.9f, 0.05f, "sample T .7 k 40 p .9 min-p .05");
    bench_sample(s, ops, 1, true, 1.f, 0, 1.f, 0.f, "sample T 1, no truncation");
    bench_sample(s, ops, 128, true, 1.f, 0, 1.f, 0.f, "sample T 1, no truncation");
    bench_top_logprobs(s, ops, 1);
    bench_top_logprobs(s, ops, 128);
    bench_penalties(s, ops, 128);
    bench_attention_prefill(s, ops, 2048, true);
    bench_attention_prefill(s, ops, 8192, true);
    bench_attention_prefill(s, ops, 2048, false);
    // Qwen3-8B prefill of 2048 tokens (qkv, o_proj, gate_up, down_proj) and a batch-128 decode's gate_up
    CublasLt lt(ctx);
    if (lt.available()) {
      bench_product(s, ops, &lt, 2048, 4096, 6144, "cuBLASLt bf16 (qkv)");
      bench_product(s, ops, nullptr, 2048, 4096, 6144, "tiled gemm bf16 (qkv)");
      bench_product(s, ops, &lt, 2048, 4096, 4096, "cuBLASLt bf16 (o_proj)");
      bench_product(s, ops, &lt, 2048, 4096, 24576, "cuBLASLt bf16 (gate_up)");
      bench_product(s, ops, &lt, 2048, 12288, 4096, "cuBLASLt bf16 (down_proj)");
      bench_product(s, ops, &lt, 128, 4096, 24576, "cuBLASLt bf16, 128 rows (gate_up)");
    } else {
      std::printf("cuBLASLt products skipped: %s\n", lt.reason().c_str());
    }
    ctx.synchronize();

    std::printf("\n%-30s %-36s %10s %9s %8s\n", "op", "shape", "median us", "GB/s", "of copy");
    for (const Row &r : g_rows) {
      const double gbs = r.bytes / r.us * 1e-3;
      std::printf("%-30s %-36s %10.1f %9.0f %7.1f%%\n", r.op.c_str(), r.shape.c_str(), r.us, gbs, 100.0 * gbs / copy_gbs);
    }
    if (!g_flop_rows.empty()) {
      std::printf("\n%-34s %-32s %10s %9s   (cuBLASLt %lld, %s)\n", "product", "shape", "median us", "TFLOP/s",
                  (long long)lt.version(), lt.library().c_str());
      for (const FlopRow &r : g_flop_rows)
        std::printf("%-34s %-32s %10.1f %9.1f\n", r.op.c_str(), r.shape.c_str(), r.us, r.flops / r.us * 1e-6);
    }
    if (!g_attention_rows.empty()) {
      std::printf("\n%-34s %-32s %10s %9s\n", "attention (causal FLOPs)", "shape", "median us", "TFLOP/s");
      for (const FlopRow &r : g_attention_rows)
        std::printf("%-34s %-32s %10.1f %9.1f\n", r.op.c_str(), r.shape.c_str(), r.us, r.flops / r.us * 1e-6);
    }
  } catch (const std::exception &e) {
    std::printf("bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
