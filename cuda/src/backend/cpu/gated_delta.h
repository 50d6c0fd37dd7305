// CPU ops of a Gated DeltaNet layer (the linear-attention layers of Qwen3.5 / Qwen3.6, transformers'
// qwen3_5 and qwen3_next). Around the projections the layer is:
//
//   qkv(T, C) = in_proj_qkv(x)           C = 2·Hk·Dk + Hv·Dv, each row [q (Hk, Dk) | k (Hk, Dk) | v (Hv, Dv)]
//   qkv       = silu(causal_conv1d(qkv))  causal_conv1d_silu, per sequence, with the conv state
//   beta, g   = gdn_gates(in_proj_b(x), in_proj_a(x))
//   o(T, Hv, Dv) = gated_delta_rule(qkv, g, beta)   with the recurrent state
//   o         = gated_rmsnorm(o, z = in_proj_z(x))  per value head; then out_proj
//
// Activations and states are fp32 (the conv weight too: the checkpoint's conv1d.weight (C, 1, W) widened and
// squeezed to (C, W) at load; A_log, dt_bias and the norm weight (Dv) likewise).
//
// Batches are flattened along T as for attention: sequence s owns rows [seq_start[s], seq_start[s+1]) and
// keeps its states in slot slot[s] of each state array, at state + slot · slot_stride (floats; the stride lets
// a caller lay slots out as it likes, e.g. a layer's conv and recurrent state in one allocation). The same call
// serves decode (one row per sequence), prefill and mixed steps, and its metadata is plain int32 arrays that a
// CUDA version can take from a step's metadata unchanged.
//
// A sequence that starts in this step is marked fresh: the ops read its states as zeros, whatever the slot
// holds, and overwrite the slot. So a slot is reused without being cleared first: no separate clearing pass
// (which the caller would have to order before the layer, on every layer's states), and stale contents of a
// reused slot can never leak into a new sequence.
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "models/gdn_geometry.h"

namespace vt::cpu {

struct RecurrentBatch {
  int32_t n_seqs;
  const int32_t *seq_start;  // (n_seqs + 1) first row of each sequence, then the total row count
  const int32_t *slot;       // (n_seqs) state slot of each sequence; no two sequences share one
  const int32_t *fresh;      // (n_seqs) nonzero: the sequence starts here, its states read as zeros; or nullptr
};

using GdnGeometry = vt::GdnGeometry;  // (models/gdn_geometry.h: one description of a layer for every backend)

// out(T, C) = silu(causal depthwise conv over each sequence's rows of x(T, C)), no bias:
//   out[t, c] = silu(Σ_j weight[c, j] · x[t - (W-1) + j, c]),  j < W,
// where rows before the sequence's first come from its conv state (zeros when fresh). The conv state of a
// slot is the last W-1 input rows, oldest first: (W-1, C) at conv_state + slot · slot_stride; the op leaves
// there the last W-1 rows of [state; this step's rows]. out must not alias x. W >= 1.
void causal_conv1d_silu(ThreadPool &pool, const float *x, const RecurrentBatch &b, int64_t C, int32_t W,
                        const float *weight, float *conv_state, int64_t slot_stride, float *out);

// Per row t and value head h (all (T, Hv) fp32):
//   beta = sigmoid(b);   g = -exp(A_log[h]) · softplus(a + dt_bias[h])   (g <= 0: the state's log decay)
void gdn_gates(const float *b, const float *a, int64_t T, int32_t n_v_heads, const float *A_log, const float *dt_bias,
               float *beta, float *g);

// The chunked form takes chunks of this many rows (transformers' and FLA's chunk size).
constexpr int32_t kDeltaRuleChunk = 64;

// Auto: a sequence of one row (decode) takes the per-token recurrence, any longer run the chunked form. On the
// CPU the chunked form measured faster from two rows on (it writes the state once per chunk, not once per
// row): with Hk 16, Hv 32, Dk = Dv = 128 on 1-2 AVX2 cores, 15-25% less time per row at 2-64 rows, ~10% at
// 1024, and a tie at one row. Recurrent and Chunked force one form for every sequence (tests compare them).
enum class DeltaRulePath { Auto, Recurrent, Chunked };

// The gated delta rule over each sequence, per value head h with key head kh = h / (Hv/Hk):
//   q_t = l2norm(q) / sqrt(Dk),  k_t = l2norm(k),   l2norm(x) = x / sqrt(Σx² + 1e-6)
//   S ← exp(g_t) · S;  S ← S + k_t ⊗ beta_t (v_t - Sᵀk_t);  o_t = Sᵀq_t
// qkv(T, C) is the conv output (raw q and k: the op normalises them); g, beta (T, Hv); out(T, Hv, Dv).
// The recurrent state S of a slot is (Hv, Dk, Dv) at state + slot · slot_stride, updated in place (read as
// zeros when fresh).
void gated_delta_rule(ThreadPool &pool, const float *qkv, const float *g, const float *beta, const RecurrentBatch &b,
                      const GdnGeometry &geo, float *state, int64_t slot_stride, float *out,
                      DeltaRulePath path = DeltaRulePath::Auto);

// out(rows, dim) = weight · x / sqrt(mean(x²) + eps) · silu(z), per row; weight(dim) used as is (not 1 + w).
// For the layer: rows = T · Hv, dim = Dv, z = in_proj_z(x). out may be x.
void gated_rmsnorm(ThreadPool &pool, const float *x, const float *z, int64_t rows, int64_t dim, const float *weight,
                   float eps, float *out);

}  // namespace vt::cpu
