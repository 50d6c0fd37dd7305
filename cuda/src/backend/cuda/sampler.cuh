// Sampling on the GPU with the host sampler's rules (sampling.cpp), one block per row:
//   sample: logits(n, vocab) fp32, rows ld elements apart, and rows(n) SampleRow (temperature, top_k, top_p,
//           min_p, u) → out_ids(n) int32 and out_logprobs(n) fp32, the token's log-softmax of the raw logits;
//   top_logprobs: the host's top-N list of the same rows (top_logprobs.cuh, on this file's machinery).
// The rules, as sampling.cpp states them: greedy when temperature is not > 0 (the lowest id of the largest
// value; NaN never wins); a row of only -inf/NaN gives token 0 and -log(vocab); a row with +inf entries samples
// among those alone (each +inf read as 0, everything else as -inf). Otherwise, with e = exp((x - max) * inv_t)
// and inv_t = 1 / temperature (a temperature whose inverse overflows is greedy): S = the finite tokens >= the
// top_k-th largest value (ties kept; all finite tokens without top-k); Z = the sum of e over S; the candidates
// C = the tokens of S with e >= min_p; walking C by value descending, ties to the lower id, the nucleus ends at
// the first token where the cumulative e reaches top_p * Z (none: all of C), its mass being that cumulative
// e; the token is the first one of the walk where the cumulative e exceeds u * mass.
//
// What makes the result exact and deterministic: each token's e is turned into an integer weight w =
// round(e * 2^44) (e <= 1, so a row's weights sum below 2^62), so every sum is an integer sum, the same in any
// order, and the thresholds become integers: the nucleus ends at the first token with cum >= ceil(top_p * Z),
// the draw is the first with cum > floor(u * mass) (at most mass - 1). The host sums the float e in double,
// so the two agree except where a threshold falls within rounding of a cumulative sum: exp's error (the host's
// exp is within 1.9e-7 of exp, expf within 2 ulp), the 2^-45 rounding of each weight (which also drops tokens
// with e < 2^-45, ~2.8e-14: no mass, never drawn), and the host's own float additions; also a token with e
// within rounding of min_p. test_cuda_ops.cpp's sample_ref bounds these per row and checks every other row.
//
// The walk order is never built for the whole vocabulary. Pass 1 reads the row for the max and the raw
// softmax sum (row_softmax_max, as argmax does). Pass 2 builds a histogram over 1024 bins of the tempered
// distance below the max, d = (max - x) * inv_t (1/32 wide; the last bin takes d >= 31.97, whose weights are
// 0): per bin the finite tokens and the candidates' weight, so cumulative counts and weights per bin are known.
// Since a bin holds an interval of values, the bin of the top_k-th token, of the nucleus's end and of the draw
// follow from prefix sums over bins; pass 3 gathers the tokens of the bins needed (at most kSampleCap) into
// shared memory, where they are sorted (value descending, id ascending) and walked exactly. A bin too full to
// gather is narrowed by key digits over its exact key range, pass by pass (10 bits each), until what is left
// fits or is one value repeated, whose j-th token in id order is then found by counting (descend()).
// Typical rows take three passes over the logits; flat rows, huge top-k and huge runs of equal values more.
#pragma once

#include "sample.cuh"
#include "sample_rows.h"

namespace vtk {

using u64 = unsigned long long;

constexpr int kSampleThreads = 1024;
constexpr int kSampleWarps = kSampleThreads / 32;
constexpr int kSampleLoads = 2;                  // 16-byte loads per thread in flight
constexpr int kSampleBins = 1024;                // == kSampleThreads: thread t owns bin t in the scans
constexpr int kTailBin = kSampleBins - 1;        // d >= 1023/32: e <= 1.3e-14, weight 0, never a candidate
constexpr float kBinsPerUnit = 32.f;             // bins per unit of tempered distance (e ratio 1.032 per bin)
constexpr int kSampleCap = 2 * kSampleThreads;   // candidates gathered and sorted at once (2 per thread)
constexpr int kSubBins = 1024;                   // digits per refinement level: 10 bits of the key
constexpr int kSubBits = 10;
constexpr float kWeightScale = 0x1p44f;          // w = round(e * 2^44)
constexpr int kMaxTopN = 20;                     // top_logprobs: SampleResult's capacity
static_assert(kSampleBins == kSampleThreads && kSubBins == kSampleThreads, "one bin per thread in the scans");

// Shared memory of one row: ~29 KB.
struct SamplerShared {
  uint32_t cnt[kSampleBins];  // pass 2: finite tokens per bin, then inclusive prefix
  u64 mass[kSampleBins];      // pass 2: candidates' weight per bin, then inclusive prefix
  union {
    u64 cand[kSampleCap];  // gathered tokens: (~key << 32) | id, so ascending order is the walk order
    struct {
      uint32_t cnt[kSubBins];
      u64 mass[kSubBins];
    } sub;  // one refinement level's histogram over key digits
  };
  u64 scan_a[kSampleWarps], scan_b[kSampleWarps];
  int n_cand, found_idx, found_id;
  int first_ids[kMaxTopN], warp_count[kSampleWarps];
  u64 found_cum;
  uint32_t key_min, key_max;
};

// ---- the sampler's view of a logit ----

// The value the sampler works on: in a row with +inf entries those are 0 and everything else -inf.
__device__ __forceinline__ float sampler_value(float x, bool inf_mode) {
  return inf_mode ? (x == INFINITY ? 0.f : -INFINITY) : x;
}
__device__ __forceinline__ bool finite_value(float v) { return v > -INFINITY && v < INFINITY; }  // NaN: false

// Order-preserving key: a larger value has a larger key; -0 is folded into +0 (the host compares them equal).
__device__ __forceinline__ uint32_t value_key(float v) {
  uint32_t b = __float_as_uint(v);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// The row's constants, the same in every thread.
struct RowView {
  const float *x;
  int vocab, vec;
  bool inf_mode;
  float mx, inv_t, min_p;
  uint32_t kth_key;  // S is the finite tokens with key >= kth_key (0: every finite token)
};

// d = (max - v) * inv_t: bitwise the negation of the host's (v - max) * inv_t, so e = exp(-d) is its exp's
// argument. Never contracted (no FMA here anyway: a difference then a product).
__device__ __forceinline__ float tempered_distance(const RowView &r, float v) {
  return __fmul_rn(__fsub_rn(r.mx, v), r.inv_t);
}
// Monotone in d (so in the value): a bin holds an interval of values. d * 32 is exact; overflow and NaN go to
// the tail.
__device__ __forceinline__ int bin_of(float d) {
  const float f = d * kBinsPerUnit;
  return f < float(kTailBin) ? int(f) : kTailBin;
}
// The weight of a token at distance d (not in the tail bin); *passes: e >= min_p.
__device__ __forceinline__ u64 weight_of(const RowView &r, float d, bool *passes) {
  const float e = expf(-d);
  *passes = e >= r.min_p;
  return __float2ull_rn(e * kWeightScale);
}

// One token as a pass sees it.
struct Tok {
  uint32_t key;
  int bin;  // -1: not finite
  float d;
};
__device__ __forceinline__ Tok tok_of(const RowView &r, float x) {
  const float v = sampler_value(x, r.inf_mode);
  if (!finite_value(v)) return Tok{0, -1, 0.f};
  const float d = tempered_distance(r, v);
  return Tok{value_key(v), bin_of(d), d};
}
// A candidate: in S, before the tail, weight > 0 and e >= min_p. Returns its weight, 0 when not one.
__device__ __forceinline__ u64 candidate_weight(const RowView &r, const Tok &t) {
  if (t.bin < 0 || t.bin >= kTailBin || t.key < r.kth_key) return 0;
  bool passes;
  const u64 w = weight_of(r, t.d, &passes);
  return passes ? w : 0;
}

// Calls f(id, x) for every logit of the row, in 16-byte loads where the row allows. Every thread makes the same
// number of calls (ids past the row come with x = NaN, which no pass takes), so f may use warp-wide votes.
template <class F>
__device__ __forceinline__ void visit_row(const RowView &r, F &&f) {
  const int tid = threadIdx.x;
  constexpr int stride = kSampleThreads;
  if (r.vec) {
    const float4 *x4 = reinterpret_cast<const float4 *>(r.x);
    const int n4 = r.vocab >> 2;
    for (int q0 = 0; q0 < n4; q0 += kSampleLoads * stride) {
      float4 a[kSampleLoads];
#pragma unroll
      for (int u = 0; u < kSampleLoads; ++u) {
        const int q = q0 + tid + u * stride;
        a[u] = q < n4 ? load_stream(x4 + q) : make_float4(NAN, NAN, NAN, NAN);
      }
#pragma unroll
      for (int u = 0; u < kSampleLoads; ++u) {
        const int i = 4 * (q0 + tid + u * stride);
        f(i, a[u].x), f(i + 1, a[u].y), f(i + 2, a[u].z), f(i + 3, a[u].w);
      }
    }
    if (4 * n4 < r.vocab) {  // the last vocab % 4 values
      const int i = 4 * n4 + tid;
      f(i, i < r.vocab ? r.x[i] : NAN);
    }
  } else {
    constexpr int K = 4 * kSampleLoads;
    for (int i0 = 0; i0 < r.vocab; i0 += K * stride) {
      float v[K];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const int i = i0 + tid + j * stride;
        v[j] = i < r.vocab ? r.x[i] : NAN;
      }
#pragma unroll
      for (int j = 0; j < K; ++j) f(i0 + tid + j * stride, v[j]);
    }
  }
}

// ---- block-wide integer reductions and scans (exact, so the same whatever the order) ----

__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, in every thread.
__device__ __forceinline__ u64 block_sum_u64(SamplerShared &s, u64 v) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum_u64(v);
  __syncthreads();  // scan_a may still be read by a previous call
  if (lane == 0) s.scan_a[warp] = v;
  __syncthreads();
  return warp_sum_u64(lane < kSampleWarps ? s.scan_a[lane] : 0);
}

// Inclusive prefix sums of (a, b) in thread order; *total_a, *total_b: the block's sums.
__device__ __forceinline__ void block_scan2(SamplerShared &s, u64 &a, u64 &b, u64 *total_a = nullptr,
                                            u64 *total_b = nullptr) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 ta = __shfl_up_sync(0xffffffffu, a, o), tb = __shfl_up_sync(0xffffffffu, b, o);
    if (lane >= o) a += ta, b += tb;
  }
  __syncthreads();  // scan_a/scan_b may still be read by a previous call
  if (lane == 31) s.scan_a[warp] = a, s.scan_b[warp] = b;
  __syncthreads();
  if (warp == 0) {
    u64 wa = s.scan_a[lane], wb = s.scan_b[lane];  // kSampleWarps == 32
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const u64 ta = __shfl_up_sync(0xffffffffu, wa, o), tb = __shfl_up_sync(0xffffffffu, wb, o);
      if (lane >= o) wa += ta, wb += tb;
    }
    s.scan_a[lane] = wa, s.scan_b[lane] = wb;  // inclusive over warps
  }
  __syncthreads();
  if (warp > 0) a += s.scan_a[warp - 1], b += s.scan_b[warp - 1];
  if (total_a) *total_a = s.scan_a[kSampleWarps - 1];
  if (total_b) *total_b = s.scan_b[kSampleWarps - 1];
}

// Adds (1, w) at cnt[bin], mass[bin] (bin < 0: nothing). A warp whose lanes all share one bin (flat rows, runs
// of equal values) adds once, as same-address atomics would otherwise serialize.
__device__ __forceinline__ void hist_add(uint32_t *cnt, u64 *mass, int bin, u64 w) {
  const int lead = __shfl_sync(0xffffffffu, bin, 0);
  if (__all_sync(0xffffffffu, bin == lead)) {
    if (lead < 0) return;
    const u64 sum = warp_sum_u64(w);
    if ((threadIdx.x & 31) == 0) {
      atomicAdd(&cnt[lead], 32u);
      if (sum) atomicAdd(&mass[lead], sum);
    }
  } else if (bin >= 0) {
    atomicAdd(&cnt[bin], 1u);
    if (w) atomicAdd(&mass[bin], w);
  }
}

// ---- pass 2: the histogram over bins ----

// Fills s.cnt/s.mass with inclusive prefix counts of finite tokens and of candidate weights per bin (S = all
// finite tokens: top-k is applied afterwards; s.cnt[kTailBin] is the count of every finite token); returns the
// weight of every finite token, Z without top-k. The tail is counted per thread, not by atomics: it holds most
// of a peaked row.
__device__ __noinline__ u64 build_histogram(SamplerShared &s, const RowView &r) {
  const int tid = threadIdx.x;
  s.cnt[tid] = 0, s.mass[tid] = 0;
  __syncthreads();
  u64 z = 0;
  uint32_t tail = 0;
  visit_row(r, [&](int, float x) {
    const Tok t = tok_of(r, x);
    int bin = -1;
    u64 wc = 0;
    if (t.bin >= 0 && t.bin < kTailBin) {
      bool passes;
      const u64 w = weight_of(r, t.d, &passes);
      bin = t.bin, z += w, wc = passes ? w : 0;
    }
    tail += t.bin == kTailBin;
    hist_add(s.cnt, s.mass, bin, wc);
  });
  const u64 n_tail = block_sum_u64(s, tail);  // its barriers also end the atomics
  u64 c = s.cnt[tid] + (tid == kTailBin ? n_tail : 0), m = s.mass[tid];
  block_scan2(s, c, m);
  s.cnt[tid] = uint32_t(c), s.mass[tid] = m;
  const u64 z_all = block_sum_u64(s, z);  // its syncs also publish cnt/mass
  return z_all;
}

// The first bin whose inclusive prefix weight exceeds T (kSampleBins when none).
__device__ __forceinline__ int first_bin_above(SamplerShared &s, long long T) {
  return __syncthreads_count((long long)s.mass[threadIdx.x] <= T);
}
__device__ __forceinline__ u64 mass_before(const SamplerShared &s, int b) { return b > 0 ? s.mass[b - 1] : 0; }
__device__ __forceinline__ uint32_t count_in(const SamplerShared &s, int b_lo, int b_hi) {
  return s.cnt[b_hi] - (b_lo > 0 ? s.cnt[b_lo - 1] : 0);
}

// The draw's threshold: the token is the first with cum > floor(u * mass), kept below mass.
__device__ __forceinline__ long long draw_target(double u, u64 mass) {
  const long long t = (long long)floor(u * double(mass));
  return min(t, (long long)mass - 1);
}

// ---- gather, sort and walk in shared memory ----

// Which tokens a pass takes: level-1 bins [bin_lo, bin_hi] and keys [key_lo, key_hi], every finite token or
// only candidates.
struct Select {
  int bin_lo, bin_hi;
  uint32_t key_lo, key_hi;
  bool candidates_only;
};
// Whether t is selected; *w: its candidate weight (0 when not a candidate, or not asked).
__device__ __forceinline__ bool selected(const RowView &r, const Select &sel, const Tok &t, u64 *w) {
  *w = 0;
  if (t.bin < sel.bin_lo || t.bin > sel.bin_hi || t.key < sel.key_lo || t.key > sel.key_hi) return false;
  if (!sel.candidates_only) return true;
  *w = candidate_weight(r, t);
  return *w > 0;
}

// Gathers the selected tokens into s.cand (at most kSampleCap: the caller's counts say so) and sorts them into
// walk order; returns how many.
__device__ __noinline__ int gather_sorted(SamplerShared &s, const RowView &r, const Select &sel) {
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid == 0) s.n_cand = 0;
  __syncthreads();
  visit_row(r, [&](int id, float x) {
    const Tok t = tok_of(r, x);
    u64 w;
    const bool take = selected(r, sel, t, &w);
    const unsigned mask = __ballot_sync(0xffffffffu, take);
    if (!mask) return;
    const int leader = __ffs(mask) - 1;
    int base = 0;
    if (lane == leader) base = atomicAdd(&s.n_cand, __popc(mask));
    base = __shfl_sync(0xffffffffu, base, leader);
    const int slot = base + __popc(mask & ((1u << lane) - 1u));
    if (take && slot < kSampleCap) s.cand[slot] = (u64(~t.key) << 32) | uint32_t(id);
  });
  __syncthreads();
  const int n = min(s.n_cand, kSampleCap);
  // Bitonic sort of the next power of two >= n, padded with the largest value; a warp alone for 64 or fewer.
  int n2 = 32;
  while (n2 < n) n2 <<= 1;
  for (int i = n + tid; i < n2; i += kSampleThreads) s.cand[i] = ~0ull;
  __syncthreads();
  if (n2 <= 64) {
    if (tid < 32) {
      for (int k = 2; k <= n2; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
          for (int p = lane; p < n2 / 2; p += 32) {
            const int a = 2 * p - (p & (j - 1)), b = a + j;
            const u64 va = s.cand[a], vb = s.cand[b];
            if ((va > vb) == ((a & k) == 0)) s.cand[a] = vb, s.cand[b] = va;
          }
          __syncwarp();
        }
    }
  } else {
    for (int k = 2; k <= n2; k <<= 1)
      for (int j = k >> 1; j > 0; j >>= 1) {
        const int p = tid;
        if (p < n2 / 2) {
          const int a = 2 * p - (p & (j - 1)), b = a + j;
          const u64 va = s.cand[a], vb = s.cand[b];
          if ((va > vb) == ((a & k) == 0)) s.cand[a] = vb, s.cand[b] = va;
        }
        __syncthreads();
      }
  }
  __syncthreads();
  return n;
}

__device__ __forceinline__ uint32_t cand_key(u64 c) { return ~uint32_t(c >> 32); }
__device__ __forceinline__ int cand_id(u64 c) { return int(uint32_t(c)); }

// The walk over sorted candidates: thread t holds positions 2t and 2t + 1, with their cumulative weight from
// acc (the weight of everything before the first candidate).
struct Walk {
  u64 cum[2];
  bool cand[2];
  u64 z_s;    // weight of the gathered tokens in S (when asked)
  u64 total;  // acc + the candidates' weight
};

__device__ __forceinline__ Walk walk_sorted(SamplerShared &s, const RowView &r, int n, u64 acc) {
  const int tid = threadIdx.x;
  Walk wk;
  u64 w[2], in_s = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * tid + h;
    w[h] = 0;
    if (j < n) {
      const uint32_t key = cand_key(s.cand[j]);
      const float v = key_value(key);
      const float d = tempered_distance(r, v);
      const Tok t{key, bin_of(d), d};
      if (key >= r.kth_key && t.bin < kTailBin) {
        bool passes;
        const u64 wt = weight_of(r, d, &passes);
        in_s += wt;
        w[h] = passes ? wt : 0;
      }
    }
    wk.cand[h] = w[h] > 0;
  }
  u64 a = w[0] + w[1], z = in_s;
  u64 total;
  block_scan2(s, a, z, &total, &wk.z_s);
  wk.cum[1] = acc + a;
  wk.cum[0] = wk.cum[1] - w[1];
  wk.total = acc + total;
  return wk;
}

// The first candidate of the walk with cum > T: its position, id and cum (position kSampleCap when none).
struct Found {
  int idx, id;
  u64 cum;
};
__device__ __forceinline__ Found first_above(SamplerShared &s, const Walk &wk, long long T) {
  const int tid = threadIdx.x;
  if (tid == 0) s.found_idx = kSampleCap;
  __syncthreads();
  int mine = kSampleCap;
  if (wk.cand[1] && (long long)wk.cum[1] > T) mine = 2 * tid + 1;
  if (wk.cand[0] && (long long)wk.cum[0] > T) mine = 2 * tid;
  if (mine < kSampleCap) atomicMin(&s.found_idx, mine);
  __syncthreads();
  const int idx = s.found_idx;
  if (idx < kSampleCap && idx / 2 == tid) s.found_cum = wk.cum[idx & 1];
  __syncthreads();
  Found f{idx, -1, s.found_cum};
  if (idx < kSampleCap) f.id = cand_id(s.cand[idx]);
  __syncthreads();  // s.found_* may be rewritten by the next call
  return f;
}

// ---- narrowing a bin too full to gather ----

// The id of the j-th (1-based, ascending id) finite token whose key is `key`. Each thread counts over its own
// contiguous run of ids; rare (a run of more than kSampleCap equal values), so not tuned.
__device__ __forceinline__ int nth_id_with_key(SamplerShared &s, const RowView &r, uint32_t key, u64 j) {
  const int tid = threadIdx.x;
  const int chunk = (r.vocab + kSampleThreads - 1) / kSampleThreads;
  const int lo = min(r.vocab, tid * chunk), hi = min(r.vocab, lo + chunk);
  auto match = [&](int i) {
    const float v = sampler_value(r.x[i], r.inf_mode);
    return finite_value(v) && value_key(v) == key;
  };
  u64 c = 0, unused = 0;
  for (int i = lo; i < hi; ++i) c += match(i);
  const u64 mine = c;
  block_scan2(s, c, unused);
  const u64 before = c - mine;
  if (tid == 0) s.found_id = -1;
  __syncthreads();
  if (before < j && j <= before + mine) {
    u64 k = before;
    for (int i = lo; i < hi; ++i)
      if (match(i) && ++k == j) {
        s.found_id = i;
        break;
      }
  }
  __syncthreads();
  const int id = s.found_id;
  __syncthreads();
  return id;
}

// Within level-1 bin b, either the key of the rank-th finite token (1-based, walk order; rank_query) or the
// first candidate where acc + cum > T (its id and cum). The bin's exact key range is narrowed by kSubBits-bit
// digits, one pass each, until the tokens left fit the candidate buffer (then gathered and walked) or share one
// key (then the answer is arithmetic on their common weight, and the id a count in id order).
__device__ __noinline__ Found descend(SamplerShared &s, const RowView &r, int b, bool rank_query, u64 rank,
                                         u64 acc, long long T, uint32_t *key_out) {
  const int tid = threadIdx.x;
  if (tid == 0) s.key_min = ~0u, s.key_max = 0;
  __syncthreads();
  visit_row(r, [&](int, float x) {
    const Tok t = tok_of(r, x);
    const bool in = t.bin == b;
    const uint32_t lo = __reduce_min_sync(0xffffffffu, in ? t.key : ~0u);
    const uint32_t hi = __reduce_max_sync(0xffffffffu, in ? t.key : 0u);
    if ((tid & 31) == 0 && lo <= hi) atomicMin(&s.key_min, lo), atomicMax(&s.key_max, hi);
  });
  __syncthreads();
  Select sel{b, b, s.key_min, s.key_max, !rank_query};
  u64 n = count_in(s, b, b);  // an upper bound on what sel takes
  for (;;) {
    if (n <= u64(kSampleCap)) {
      const int m = gather_sorted(s, r, sel);
      if (rank_query) {
        *key_out = cand_key(s.cand[max(min(int(rank), m) - 1, 0)]);
        __syncthreads();
        return Found{0, -1, 0};
      }
      const Walk wk = walk_sorted(s, r, m, acc);
      return first_above(s, wk, T);
    }
    if (sel.key_lo == sel.key_hi) {  // one value, more than kSampleCap times: all alike but for the id
      if (rank_query) {
        *key_out = sel.key_lo;
        return Found{0, -1, 0};
      }
      const float d = tempered_distance(r, key_value(sel.key_lo));
      bool passes;
      const u64 w = max(weight_of(r, d, &passes), 1ull);
      const long long over = T - (long long)acc;  // >= 0: the crossing is among these
      const u64 j = over < 0 ? 1 : min(u64(over) / w + 1, n);  // the first j with acc + j w > T
      const int id = nth_id_with_key(s, r, sel.key_lo, j);
      return Found{0, id, acc + j * w};
    }
    const int shift = max(0, 32 - __clz(int(sel.key_hi - sel.key_lo)) - kSubBits);
    s.sub.cnt[tid] = 0, s.sub.mass[tid] = 0;
    __syncthreads();
    visit_row(r, [&](int, float x) {
      const Tok t = tok_of(r, x);
      u64 w;
      const bool take = selected(r, sel, t, &w);
      hist_add(s.sub.cnt, s.sub.mass, take ? int((t.key - sel.key_lo) >> shift) : -1, w);
    });
    __syncthreads();
    // Walk order is key descending: thread t takes digit kSubBins - 1 - t.
    const int digit_of_t = kSubBins - 1 - tid;
    u64 c = s.sub.cnt[digit_of_t], m = s.sub.mass[digit_of_t];
    const u64 c_own = c, m_own = m;
    block_scan2(s, c, m);
    const int t_star = rank_query ? __syncthreads_count(c < rank) : __syncthreads_count((long long)(acc + m) <= T);
    if (tid == min(t_star, kSubBins - 1)) {
      s.found_cum = c - c_own;   // tokens before this digit
      s.scan_a[0] = m - m_own;   // weight before this digit (scan_a is free until the next scan)
      s.found_idx = int(c_own);
    }
    __syncthreads();
    const int digit = kSubBins - 1 - min(t_star, kSubBins - 1);
    if (rank_query) rank -= s.found_cum;
    else acc += s.scan_a[0];
    n = u64(s.found_idx);
    const u64 lo = u64(sel.key_lo) + (u64(digit) << shift);
    sel.key_lo = uint32_t(lo);
    sel.key_hi = uint32_t(min(u64(sel.key_hi), lo + (u64(1) << shift) - 1));
    __syncthreads();
  }
}

// Within bin b: the first candidate with acc + cum > T.
__device__ __forceinline__ Found crossing_in_bin(SamplerShared &s, const RowView &r, int b, u64 acc, long long T) {
  if (count_in(s, b, b) <= uint32_t(kSampleCap)) {
    const int n = gather_sorted(s, r, Select{b, b, 0u, ~0u, true});
    const Walk wk = walk_sorted(s, r, n, acc);
    return first_above(s, wk, T);
  }
  uint32_t unused;
  return descend(s, r, b, false, 0, acc, T, &unused);
}

// ---- the draw ----

// After top-k's value is known (r.kth_key) and lies in bin b_k: returns Z over S, and makes the prefix weights
// from b_k on count only the candidates in S (bin b_k's are those >= kth_key; later bins hold none).
__device__ __noinline__ u64 restrict_to_top_k(SamplerShared &s, const RowView &r, int b_k) {
  u64 zs = 0, wk = 0;
  visit_row(r, [&](int, float x) {
    const Tok t = tok_of(r, x);
    if (t.bin < 0 || t.bin >= kTailBin || t.key < r.kth_key) return;
    bool passes;
    const u64 w = weight_of(r, t.d, &passes);
    zs += w;
    if (t.bin == b_k && passes) wk += w;
  });
  const u64 z = block_sum_u64(s, zs);
  const u64 in_bk = block_sum_u64(s, wk);
  const u64 before = mass_before(s, b_k);
  __syncthreads();
  if (int(threadIdx.x) >= b_k) s.mass[threadIdx.x] = before + in_bk;
  __syncthreads();
  return z;
}

// top_k small enough that all its bins fit the buffer: gather them, then top-k, top-p, min-p and the draw in
// shared memory.
__device__ __noinline__ int draw_top_k_gathered(SamplerShared &s, RowView r, const vt::cuda::SampleRow &p,
                                                   int b_k, bool top_p_on, double top_p, double u) {
  const int n = gather_sorted(s, r, Select{0, b_k, 0u, ~0u, false});
  r.kth_key = cand_key(s.cand[p.top_k - 1]);
  const Walk wk = walk_sorted(s, r, n, 0);
  u64 mass = wk.total;
  if (top_p_on) {
    const Found c = first_above(s, wk, (long long)ceil(top_p * double(wk.z_s)) - 1);
    if (c.idx < kSampleCap) mass = c.cum;
  }
  const Found t = first_above(s, wk, draw_target(u, mass));
  return t.id;
}

// Without top-k, or with it resolved (r.kth_key set, bins after b_end empty, z over S): top-p, min-p, draw.
__device__ __noinline__ int draw_nucleus(SamplerShared &s, const RowView &r, bool top_p_on, double top_p, double u,
                                            u64 z, int b_end) {
  u64 mass = s.mass[b_end];
  if (top_p_on) {
    const long long t_p = (long long)ceil(top_p * double(z)) - 1;  // the nucleus ends at the first cum > t_p
    const int b_p = first_bin_above(s, t_p);
    if (b_p <= b_end) {
      // The draw's bin lies between the one where cum passes the smallest possible target and b_p: gather all
      // of them at once if they fit.
      const u64 acc_p = mass_before(s, b_p);
      const int b_lo = acc_p ? first_bin_above(s, draw_target(u, acc_p)) : b_p;
      if (count_in(s, b_lo, b_p) <= uint32_t(kSampleCap)) {
        const int n = gather_sorted(s, r, Select{b_lo, b_p, 0u, ~0u, true});
        const Walk wk = walk_sorted(s, r, n, mass_before(s, b_lo));
        const Found c = first_above(s, wk, t_p);
        return first_above(s, wk, draw_target(u, c.idx < kSampleCap ? c.cum : wk.total)).id;
      }
      mass = crossing_in_bin(s, r, b_p, acc_p, t_p).cum;
    }
  }
  const long long t_u = draw_target(u, mass);
  const int b_u = first_bin_above(s, t_u);
  return crossing_in_bin(s, r, b_u, mass_before(s, b_u), t_u).id;
}

// The token for a row to be sampled (temperature > 0, finite inv_t; max finite, or 0 in a +inf row).
__device__ __forceinline__ int draw_token(SamplerShared &s, RowView r, const vt::cuda::SampleRow &p) {
  const int tid = threadIdx.x;
  const bool top_p_on = p.top_p < 1.f;
  const double top_p = top_p_on ? fmax(double(p.top_p), 0.0) : 1.0;
  const double u = fmin(fmax(p.u, 0.0), 0x1.fffffffffffffp-1);  // [0, 1); NaN as 0
  u64 z = build_histogram(s, r);
  int b_end = kTailBin;  // the tail's prefix repeats bin kTailBin - 1's
  if (p.top_k > 0 && p.top_k < r.vocab) {
    const int b_k = __syncthreads_count(s.cnt[tid] < uint32_t(p.top_k));  // the top_k-th token's bin
    if (b_k < kTailBin) {  // else every token with weight is in the top-k
      if (s.cnt[b_k] <= uint32_t(kSampleCap)) return draw_top_k_gathered(s, r, p, b_k, top_p_on, top_p, u);
      uint32_t kth;
      descend(s, r, b_k, true, u64(p.top_k) - (b_k ? s.cnt[b_k - 1] : 0), 0, 0, &kth);
      r.kth_key = kth;
      z = restrict_to_top_k(s, r, b_k);
      b_end = b_k;
    }
  }
  return draw_nucleus(s, r, top_p_on, top_p, u, z, b_end);
}

// Pass 1: argmax's max, its id and the raw softmax sum. Out of line, as the passes after it, so that no loop
// over the logits shares registers with the draw's bookkeeping (1024 threads leave 64 registers each).
__device__ __noinline__ SoftmaxMax sampler_first_pass(const float *x, int vocab, int vec) {
  return row_softmax_max(x, vocab, vec);
}

// Grid (n), block kSampleThreads. vec: every row 16-byte aligned (ld % 4 == 0, logits aligned).
__device__ __forceinline__ void sample_row(const float *__restrict__ logits, int64_t ld, int vocab, int vec,
                                           const vt::cuda::SampleRow *__restrict__ rows,
                                           int32_t *__restrict__ out_ids, float *__restrict__ out_logprobs) {
  __shared__ SamplerShared s;
  const int64_t row = blockIdx.x;
  const float *x = logits + row * ld;
  const vt::cuda::SampleRow p = rows[row];
  const SoftmaxMax st = sampler_first_pass(x, vocab, vec);
  const bool inf_mode = st.m == INFINITY;
  const float n_inf = inf_mode ? count_pos_inf(x, vocab) : 0.f;
  int token = st.id;  // greedy: the lowest id of the largest value (in a +inf row, the first +inf)
  if (st.m == -INFINITY) {
    token = 0;
  } else if (p.temperature > 0.f) {
    const float inv_t = __fdiv_rn(1.f, p.temperature);
    if (inv_t < INFINITY) {  // else the limit is greedy
      const float min_p = p.min_p > 0.f ? fminf(p.min_p, 1.f) : 0.f;
      const RowView r{x, vocab, vec, inf_mode, inf_mode ? 0.f : st.m, inv_t, min_p, 0u};
      token = draw_token(s, r, p);
      if (token < 0 || token >= vocab) token = st.id;  // cannot happen (the counts agree); never a bad id
    }
  }
  if (threadIdx.x == 0) {
    out_ids[row] = token;
    if (out_logprobs) {
      double lp;
      if (inf_mode) lp = -log(double(n_inf));
      else if (st.m == -INFINITY) lp = -log(double(vocab));
      else lp = double(x[token]) - double(st.m) - log(double(st.s));
      out_logprobs[row] = float(lp);
    }
  }
}

}  // namespace vtk
