// Gated DeltaNet kernels (the linear-attention layers of Qwen3.5 / Qwen3.6): the CUDA forms of
// backend/cpu/gated_delta.h's ops, with the same contracts (read them there), on device memory. Activations
// (the conv's input and output, the gates' inputs, the delta rule's qkv and output, the norm's x, z and
// output) are in the activation type T (float, or bf16 with fp32 arithmetic inside); states, conv weights,
// A_log, dt_bias, the norm weight and the gates' outputs g and beta are fp32. Batches are the CPU's
// RecurrentBatch in device memory: int32 seq_start (n_seqs + 1) and slot (n_seqs), with a sequence's freshness
// read from its first position, pos0 (n_seqs, or null: none fresh): pos0 == 0 starts the sequence (the CPU
// decoder's rule, from the same positions), so a captured step whose positions the device moves on itself
// (step_advance.h) needs no flags of its own. A slot < 0 is a padding sequence (a decode graph's rows past the
// batch): it runs from zero states and keeps nothing, so padding never touches a real sequence's slot. One
// launch serves any lengths and a captured graph replays for new ones. No kernel allocates or waits on the host.
//
// Launches (gated_delta_ops.cpp sets them up):
//   conv_chunk         grid (row chunks, ceil(C / kConvThreads)), block kConvThreads: a thread walks one
//                      channel over one chunk of the batch's rows;
//   gates_all          1-D grid-stride over T · Hv;
//   delta_rule_recurrent  grid (n_seqs · Hv · ceil(Dv / kRuleCols)), block kRuleThreads: a block owns kRuleCols
//                      columns of one (sequence, value head)'s state in registers and walks the sequence's rows;
//   gated_rmsnorm_rows grid (ceil(rows / 8)), block 256: a warp per row.
#pragma once

#include "common.cuh"

namespace vtk {

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }

// ---------------------------------------------------------------------------------------------------------
// Causal depthwise conv1d + SiLU with the conv state (cpu::causal_conv1d_silu).
//
// A thread holds its channel's last W-1 inputs (the window) in registers and walks rows, so each input is read
// once. The flattened rows are cut into chunks of rows_per_chunk (the host picks it from T, so that long
// prefills still fill the GPU); a chunk's thread takes every sequence that overlaps the chunk, reading the W-1
// rows before its first row from x. Only one thread per (sequence, channel) may touch the sequence's conv state,
// since the state is updated in place: the owner, the thread of the chunk holding the sequence's first row
// (for a sequence with no rows, the chunk where it would start; the last one past the end). The owner reads
// the old state into its window, runs the sequence's first W-1 rows even past its chunk's end (they are the
// rows that need the old state), and writes the new state; the other chunks of the sequence skip those rows,
// so their windows come from x alone. Control flow depends on the chunk only, never on the channel: the warps
// of a block stay converged.
constexpr int kConvMaxWidth = 4;  // the models' conv_kernel_size (causal-conv1d's kernels stop at 4 too)
constexpr int kConvThreads = 128;

// The first sequence whose rows end at or after row r (every sequence that overlaps rows >= r, or starts there
// with no rows, comes at or after it).
__device__ __forceinline__ int first_seq_ending_from(const int32_t *seq_start, int n_seqs, int r) {
  int lo = 0, hi = n_seqs;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (seq_start[mid + 1] >= r) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

template <class T>
__device__ __forceinline__ void conv_chunk(const T *__restrict__ x, long long x_ld, const int32_t *__restrict__ seq_start,
                                           const int32_t *__restrict__ slot, const int32_t *__restrict__ pos0,
                                           int n_seqs, int rows, int C, int W, const float *__restrict__ weight,
                                           float *__restrict__ conv_state, long long slot_stride, T *__restrict__ out,
                                           int rows_per_chunk) {
  constexpr int K = kConvMaxWidth;
  const int c = blockIdx.y * kConvThreads + threadIdx.x;
  if (c >= C) return;  // no barriers below
  const int chunk = blockIdx.x, last_chunk = gridDim.x - 1, hist = W - 1;
  const int r0 = chunk * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  // Taps right-aligned: tap K-1 multiplies the current row, tap K-1-m the row m before it (window slot K-1-m).
  // Taps below K-W do not exist for this W and are skipped (not multiplied by zero: the window's unused slots
  // may hold any finite or infinite input).
  float w[K];
#pragma unroll
  for (int i = 0; i < K; ++i) w[i] = i >= K - W ? weight[int64_t(c) * W + i - (K - W)] : 0.f;

  for (int s = first_seq_ending_from(seq_start, n_seqs, r0); s < n_seqs; ++s) {
    const int start = seq_start[s], end = seq_start[s + 1];
    const bool owner = min(start / rows_per_chunk, last_chunk) == chunk;
    if (!owner && start >= r1) break;  // starts in a later chunk
    int a, b;                          // this thread's rows of the sequence
    if (owner) a = start, b = max(min(end, r1), min(end, start + hist));
    else a = max(r0, start + hist), b = min(end, r1);
    if (!owner && a >= b) continue;

    const int32_t sl = slot[s];
    const bool keep = sl >= 0;  // padding: from zeros, nothing kept
    float *state = keep ? conv_state + int64_t(sl) * slot_stride + c : nullptr;
    const bool zeros = !keep || (pos0 && pos0[s] == 0);
    // win[K-1-j]: the input j rows before row a (j = 1..hist). The owner's row a is the sequence's first: those
    // inputs are the state's rows hist - j (oldest first), or zeros when fresh.
    float win[K - 1];
#pragma unroll
    for (int j = 1; j < K; ++j) {
      float v = 0.f;
      if (j <= hist) {
        if (!owner) v = to_f32(x[int64_t(a - j) * x_ld + c]);
        else if (!zeros) v = state[int64_t(hist - j) * C];
      }
      win[K - 1 - j] = v;
    }
#pragma unroll 4
    for (int r = a; r < b; ++r) {
      const float xv = to_f32(x[int64_t(r) * x_ld + c]);
      float acc = 0.f;  // oldest tap first, as the CPU op sums
#pragma unroll
      for (int i = 0; i < K - 1; ++i)
        if (i >= K - W) acc += w[i] * win[i];
      acc += w[K - 1] * xv;
      out[int64_t(r) * C + c] = from_f32<T>(silu(acc));
#pragma unroll
      for (int i = 0; i < K - 2; ++i) win[i] = win[i + 1];
      win[K - 2] = xv;
    }
    if (!owner || !keep) continue;
    // The new state: the last hist inputs of [old state; rows]. When the owner ran the whole sequence its window
    // is exactly that (old entries included, for a sequence shorter than hist); otherwise they are x rows.
#pragma unroll
    for (int j = 1; j < K; ++j)
      if (j <= hist)
        state[int64_t(hist - j) * C] = b == end ? win[K - 1 - j] : to_f32(x[int64_t(end - j) * x_ld + c]);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Gates (cpu::gdn_gates): beta = sigmoid(b), g = -exp(A_log[h]) · softplus(a + dt_bias[h]). b and a rows ld
// elements apart (in_proj_b / in_proj_a columns of a wider projection output); beta and g (T, Hv) fp32.
template <class T>
__device__ __forceinline__ void gates_all(const T *__restrict__ b, const T *__restrict__ a, long long ld, long long rows,
                                          int n_v_heads, const float *__restrict__ A_log,
                                          const float *__restrict__ dt_bias, float *__restrict__ beta,
                                          float *__restrict__ g) {
  const int64_t n = rows * n_v_heads;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / n_v_heads;
    const int h = int(e - t * n_v_heads);
    const float bv = to_f32(b[t * ld + h]);
    const float x = to_f32(a[t * ld + h]) + dt_bias[h];
    const float softplus = x > 20.f ? x : log1pf(expf(x));  // torch's default threshold, as the CPU op
    beta[e] = 1.f / (1.f + expf(-bv));
    g[e] = -expf(A_log[h]) * softplus;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The gated delta rule, token by token (cpu::gated_delta_rule's recurrent form), per (sequence, value head h,
// key head kh = h / (Hv/Hk)):
//   q = l2norm(q) / sqrt(Dk), k = l2norm(k);  S ← exp(g) S;  S ← S + k ⊗ beta (v - Sᵀk);  o = Sᵀq
//
// Column c of S (Dk, Dv) evolves on its own: (Sᵀk)_c, the update and (Sᵀq)_c only involve column c, given q, k
// and v_c. So a block owns kRuleCols columns of one head's state, in registers, for the whole sequence: 4 warps
// of 8 columns each, a column's Dk rows spread over 4 lanes (lane = 8 · row slice + column; the lanes of a row
// slice read 8 consecutive floats of a state row, a full 32-byte sector). A thread holds kRuleRows = 32 entries of
// its column, rows 16 j + 4 rs + e (j < 8, e < 4, rs its row slice), so its q and k values are 8 float4 reads
// of shared memory that 4 row slices take from 4 different 16-byte words, without bank conflicts. Column sums
// (Sᵀk, Sᵀq) are the thread's 32 products and two shuffles over the row slices.
//
// Per row: every block loads the row's q and k of its key head (a thread per element, Dk <= 128) and its sums
// of squares (one block reduction); the l2 norms are applied as scalars (Sᵀk_n = |k|⁻¹ Sᵀk, k_n ⊗ d = k ⊗ |k|⁻¹ d)
// so the shared rows stay raw. The next row's inputs are loaded while the current one computes, and the shared
// rows are double-buffered, so a row costs one barrier. The decay is folded in as on the CPU: Sᵀk of the decayed
// state is exp(g) · Sᵀk of the old one, and the update scales each entry by exp(g) as it adds k · delta.
//
// Decode (one row) is a load and a store of the state; prefill runs its rows one after the other, each a few
// hundred cycles of dependent work per block. The chunked form (kDeltaRuleChunk rows at a time on tensor cores,
// as cpu::gated_delta_rule's Chunked path) is the prefill's next step: it will be a second entry point over the
// sequences with many rows (a work list built on the host from seq_start, as attention_prefill's tiles), this one
// keeping the decode rows; delta_rule_recurrent takes its sequence as an argument for that reason.
constexpr int kRuleThreads = 128;
constexpr int kRuleCols = 32;      // value columns per block: 8 per warp
constexpr int kRuleMaxKeyDim = 128;  // a q / k element per thread; the models' head_k_dim
constexpr int kRuleRows = kRuleMaxKeyDim / 4;  // state entries per thread: a column over 4 row slices
constexpr float kL2NormEps = 1e-6f;  // transformers' (and FLA's) l2norm eps

template <class T>
__device__ __forceinline__ void delta_rule_recurrent(int s, int h, int col_block, const T *__restrict__ qkv,
                                                     const float *__restrict__ g, const float *__restrict__ beta,
                                                     const int32_t *__restrict__ seq_start,
                                                     const int32_t *__restrict__ slot, const int32_t *__restrict__ pos0,
                                                     int n_k_heads, int n_v_heads, int Dk, int Dv,
                                                     float *__restrict__ state, long long slot_stride,
                                                     T *__restrict__ out) {
  __shared__ __align__(16) float qk[2][2][kRuleMaxKeyDim];  // [buffer][q, k][element], raw
  __shared__ float2 part[2][kRuleThreads / 32];              // [buffer][warp]: (Σq², Σk²) of the warp's elements
  const int t0 = seq_start[s], t1 = seq_start[s + 1];
  const int32_t sl = slot[s];
  const bool keep = sl >= 0;  // padding: from zeros, nothing kept
  const bool zeros = !keep || (pos0 && pos0[s] == 0);
  if (t0 == t1 && !(zeros && keep)) return;  // nothing to run or reset (the whole block: before any barrier)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, rs = lane >> 3;
  const int col = col_block * kRuleCols + warp * 8 + (lane & 7);
  const bool col_ok = col < Dv;
  const int kh = h / (n_v_heads / n_k_heads);
  const int64_t C = 2 * int64_t(n_k_heads) * Dk + int64_t(n_v_heads) * Dv;
  float *Sg = state + int64_t(keep ? sl : 0) * slot_stride + int64_t(h) * Dk * Dv + col;  // (padding: never touched)

  // Rows of S past Dk stay zero (and meet zero q, k): they change nothing.
  float S[kRuleRows];
#pragma unroll
  for (int j = 0; j < kRuleRows / 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * j + 4 * rs + e;
      S[4 * j + e] = !zeros && col_ok && r < Dk ? Sg[int64_t(r) * Dv] : 0.f;
    }

  // Row t's inputs for this thread: q and k element tid, v of its column, the head's g and beta.
  const T *q_base = qkv + int64_t(kh) * Dk + tid, *k_base = q_base + int64_t(n_k_heads) * Dk;
  const T *v_base = qkv + 2 * int64_t(n_k_heads) * Dk + int64_t(h) * Dv + col;
  float nq = 0.f, nk = 0.f, nv = 0.f, ng = 0.f, nb = 0.f;
  auto load = [&](int t) {
    if (tid < Dk) nq = to_f32(q_base[t * C]), nk = to_f32(k_base[t * C]);
    if (col_ok) nv = to_f32(v_base[t * C]);
    ng = g[int64_t(t) * n_v_heads + h], nb = beta[int64_t(t) * n_v_heads + h];
  };
  if (t0 < t1) load(t0);
  const float inv_sqrt_dk = 1.f / sqrtf(float(Dk));
  for (int t = t0; t < t1; ++t) {
    const int buf = (t - t0) & 1;
    const float qv = nq, kv = nk, v = nv, decay = expf(ng), bt = nb;
    if (t + 1 < t1) load(t + 1);  // in flight while this row computes
    qk[buf][0][tid] = qv, qk[buf][1][tid] = kv;
    const float sq = warp_sum(qv * qv), sk = warp_sum(kv * kv);
    if (lane == 0) part[buf][warp] = make_float2(sq, sk);
    // One barrier a row: buffer buf was last read two rows ago, before every thread passed the previous barrier.
    __syncthreads();
    float2 ss = part[buf][0];
#pragma unroll
    for (int w = 1; w < kRuleThreads / 32; ++w) ss.x += part[buf][w].x, ss.y += part[buf][w].y;
    const float q_scale = 1.f / sqrtf(ss.x + kL2NormEps) * inv_sqrt_dk, k_scale = 1.f / sqrtf(ss.y + kL2NormEps);
    const float4 *q4 = reinterpret_cast<const float4 *>(qk[buf][0]), *k4 = reinterpret_cast<const float4 *>(qk[buf][1]);

    // (Sᵀk)_col over this thread's rows, four partial sums, then over the 4 row slices.
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll
    for (int j = 0; j < kRuleRows / 4; ++j) {
      const float4 kk = k4[4 * j + rs];
      a0 = fmaf(S[4 * j], kk.x, a0), a1 = fmaf(S[4 * j + 1], kk.y, a1);
      a2 = fmaf(S[4 * j + 2], kk.z, a2), a3 = fmaf(S[4 * j + 3], kk.w, a3);
    }
    float skv = (a0 + a1) + (a2 + a3);
    skv += __shfl_xor_sync(0xffffffffu, skv, 8);
    skv += __shfl_xor_sync(0xffffffffu, skv, 16);
    const float delta = bt * (v - decay * (skv * k_scale));
    const float dk = delta * k_scale;  // k_n ⊗ delta = k ⊗ (|k|⁻¹ delta)

    // S ← decay · S + k ⊗ delta, and (Sᵀq)_col of the new state in the same pass.
    float o0 = 0.f, o1 = 0.f, o2 = 0.f, o3 = 0.f;
#pragma unroll
    for (int j = 0; j < kRuleRows / 4; ++j) {
      const float4 kk = k4[4 * j + rs], qq = q4[4 * j + rs];
      S[4 * j] = fmaf(kk.x, dk, decay * S[4 * j]), o0 = fmaf(S[4 * j], qq.x, o0);
      S[4 * j + 1] = fmaf(kk.y, dk, decay * S[4 * j + 1]), o1 = fmaf(S[4 * j + 1], qq.y, o1);
      S[4 * j + 2] = fmaf(kk.z, dk, decay * S[4 * j + 2]), o2 = fmaf(S[4 * j + 2], qq.z, o2);
      S[4 * j + 3] = fmaf(kk.w, dk, decay * S[4 * j + 3]), o3 = fmaf(S[4 * j + 3], qq.w, o3);
    }
    float o = (o0 + o1) + (o2 + o3);
    o += __shfl_xor_sync(0xffffffffu, o, 8);
    o += __shfl_xor_sync(0xffffffffu, o, 16);
    if (rs == 0 && col_ok) out[(int64_t(t) * n_v_heads + h) * Dv + col] = from_f32<T>(o * q_scale);
  }

  if (!keep) return;  // (no barrier below)
  // The store's row addresses are recomputed from an opaque copy of the base and stride: otherwise the compiler
  // keeps the load's 32 addresses (64 registers) alive across the row loop, 164 registers a thread against 80.
  int dv = Dv;
  asm volatile("" : "+l"(Sg), "+r"(dv));
#pragma unroll
  for (int j = 0; j < kRuleRows / 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * j + 4 * rs + e;
      if (col_ok && r < Dk) Sg[int64_t(r) * dv] = S[4 * j + e];
    }
}

// ---------------------------------------------------------------------------------------------------------
// Gated RMSNorm (cpu::gated_rmsnorm): out = weight · x / sqrt(mean(x²) + eps) · silu(z), a warp per row of dim.
// Norm row r is x + r · dim; its z is z + (r / heads) · z_ld + (r % heads) · dim (z_ld = heads · dim: z
// contiguous; wider: in_proj_z's columns of a wider projection output). out may be x: a lane writes only
// the elements it read.
constexpr int kNormRowsPerBlock = 8;

template <class T>
__device__ __forceinline__ void gated_rmsnorm_rows(const T *x, const T *__restrict__ z, long long rows, int dim,
                                                   int heads, long long z_ld, const float *__restrict__ weight,
                                                   float eps, T *out) {
  const int64_t r = int64_t(blockIdx.x) * kNormRowsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;  // a whole warp: no barriers below
  const int lane = threadIdx.x & 31;
  const T *xr = x + r * dim, *zr = z + (r / heads) * z_ld + (r % heads) * dim;
  T *o = out + r * dim;
  float ss = 0.f;
  for (int i = lane; i < dim; i += 32) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  const float inv = 1.f / sqrtf(warp_sum(ss) / float(dim) + eps);
  for (int i = lane; i < dim; i += 32) o[i] = from_f32<T>(weight[i] * (to_f32(xr[i]) * inv) * silu(to_f32(zr[i])));
}

}  // namespace vtk
