// CPU backend ops. Activations are fp32; large weight matrices are used in place from the checkpoint mmap
// in their stored dtype (bf16, fp16 or fp32) and widened to fp32 in registers; accumulation is fp32.
// Every op that is worth it runs on the engine's ThreadPool. SIMD paths (AVX-512, AVX2+FMA+F16C on x86-64,
// NEON on arm64) are chosen at run time from what the CPU reports, with a scalar path that is the reference.
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "dtype.h"

namespace vt::cpu {

// y(T, N) = x(T, K) · w(N, K)ᵀ (+ bias(N)).  x, y fp32 row-major; w row-major in `wt` (HF Linear layout:
// one row per output feature); bias fp32 or nullptr. Threads split the N dimension.
void matmul(ThreadPool &pool, const float *x, int64_t T, int64_t K, const void *w, DType wt, int64_t N,
            const float *bias, float *y);

// out(T, dim) = table[ids[t]] widened to fp32. table (vocab, dim) in `dt`.
void embed(const void *table, DType dt, int64_t dim, const int32_t *ids, int64_t T, float *out);

// In place: x(rows, dim) ← x / rms(x) * weight, rms over each row, fp32 weight(dim).
void rmsnorm(ThreadPool &pool, float *x, int64_t rows, int64_t dim, const float *weight, float eps);

// Fused residual add + norm, the pattern between sub-blocks:
//   residual(rows, dim) += x;   out(rows, dim) = rmsnorm(residual) * weight.
void add_rmsnorm(ThreadPool &pool, float *residual, const float *x, int64_t rows, int64_t dim, const float *weight,
                 float eps, float *out);

// In place rotary embedding, HF "rotate_half" (NeoX) layout: for each head, pairs (i, i + rot/2), i < rot/2.
// x(T, n_heads, head_dim); pos(T); inv_freq(rot/2) already includes any scaling; cos/sin are multiplied
// by `attn_scale` (YaRN's attention factor; 1 otherwise). rot = rotary_dims (0: head_dim): partial RoPE turns
// the leading rot dims of each head and leaves the rest (Qwen3.5: 64 of 256).
void rope(ThreadPool &pool, float *x, int64_t T, int32_t n_heads, int32_t head_dim, const int32_t *pos,
          const float *inv_freq, float attn_scale, int32_t rotary_dims = 0);

// out(T, F) = silu(gate_up[:, :F]) * gate_up[:, F:2F]   where gate_up is (T, 2F) (gate and up concatenated
// by the caller's layout), or with separate buffers below.
void silu_mul(ThreadPool &pool, const float *gate, const float *up, int64_t T, int64_t F, float *out);

// Paged attention over the KV cache of one layer, causal, GQA.
// k_cache / v_cache: (n_blocks, block_size, n_kv_heads, head_dim) fp32.
// q(T, n_heads, head_dim) for the flattened batch; out(T, n_heads, head_dim).
// Sequence s owns query rows [seq_q_start[s], seq_q_start[s+1]); its first query row is at position
// seq_pos0[s] and query row j attends keys at positions 0 .. seq_pos0[s] + j (inclusive), whose slots are
// block_tables[s * max_blocks_per_seq + p / block_size] * block_size + p % block_size.
struct AttentionBatch {
  int32_t n_seqs;
  const int32_t *seq_q_start;   // (n_seqs + 1)
  const int32_t *seq_pos0;      // (n_seqs)
  const int32_t *block_tables;  // (n_seqs, max_blocks_per_seq)
  int32_t max_blocks_per_seq;
  int32_t block_size;
};
void attention(ThreadPool &pool, const float *q, const float *k_cache, const float *v_cache, const AttentionBatch &b,
               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, float *out);

// Writes the new tokens' k, v (T, n_kv_heads, head_dim) into the cache slots slot[t].
void kv_store(const float *k, const float *v, int64_t T, int32_t n_kv_heads, int32_t head_dim, const int32_t *slot,
              float *k_cache, float *v_cache);

}  // namespace vt::cpu
