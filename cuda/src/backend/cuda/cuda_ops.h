// CUDA backend ops: the functions of cpu_ops.h, on device memory, enqueued on a stream. Activations are bf16
// with fp32 arithmetic inside every kernel (the product default), or fp32 (a debugging mode whose results
// match the CPU backend to fp32 rounding). Weights: bf16 for the matrices; norm weights, biases and the RoPE
// inv_freq table fp32; the embedding table in its stored dtype. All pointers are device pointers (CUdeviceptr)
// and every buffer is contiguous, row-major, in the activation type unless said otherwise. Nothing here
// synchronizes: errors of a running kernel surface at the caller's next synchronizing call.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/sample_rows.h"
#include "backend/cuda/step_advance.h"
#include "dtype.h"
#include "tuning.h"

namespace vt::cuda {

enum class Act : uint8_t { F32, BF16 };
inline size_t act_size(Act a) { return a == Act::F32 ? 4 : 2; }
inline const char *act_name(Act a) { return a == Act::F32 ? "f32" : "bf16"; }

// cpu::AttentionBatch with the arrays in device memory.
struct DeviceAttentionBatch {
  int32_t n_seqs;
  CUdeviceptr seq_q_start;   // (n_seqs + 1) int32
  CUdeviceptr seq_pos0;      // (n_seqs) int32
  CUdeviceptr block_tables;  // (n_seqs, max_blocks_per_seq) int32
  int32_t max_blocks_per_seq;
  int32_t block_size;
};

class Ops {
 public:
  // Resolves every kernel for activation type `act` up front, so a missing one fails here, not mid-step.
  // tuning: the kernel forms to use where the GPU has them (the defaults are the product; tests turn one off).
  Ops(Context &ctx, Act act, const CudaOpsTuning &tuning = {});

  Act act() const { return act_; }

  // out(T, dim) = table[ids[t]]; table (vocab, dim) in `dt`; ids int32. out fp32 when out_f32 (the residual
  // stream), else the activation type.
  void embed(CUstream s, CUdeviceptr table, DType dt, int64_t dim, CUdeviceptr ids, int64_t T, CUdeviceptr out,
             bool out_f32 = false);

  // out(rows, dim) = x / rms(x) * weight; out may be x.
  void rmsnorm(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps, CUdeviceptr out);

  // residual(rows, dim) += x; out = rmsnorm(residual) * weight.
  void add_rmsnorm(CUstream s, CUdeviceptr residual, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight,
                   float eps, CUdeviceptr out);

  // The fp32 residual stream (both activation types; with fp32 activations these are rmsnorm/add_rmsnorm):
  //   rmsnorm_res32:     out(rows, dim) = rmsnorm(x) * weight, x fp32, out fp32 when out_f32 (the lm_head's
  //                      input after a fused step's last residual add), else the activation type;
  //   add_rmsnorm_res32: residual(rows, dim) fp32 += x (fp32 when x_f32, else the activation type);
  //                      out = rmsnorm(residual) * weight, fp32 when out_f32 (the lm_head's input), else the
  //                      activation type (the next product's input).
  void rmsnorm_res32(CUstream s, CUdeviceptr x, int64_t rows, int64_t dim, CUdeviceptr weight, float eps,
                     CUdeviceptr out, bool out_f32 = false);
  void add_rmsnorm_res32(CUstream s, CUdeviceptr residual, CUdeviceptr x, bool x_f32, int64_t rows, int64_t dim,
                         CUdeviceptr weight, float eps, CUdeviceptr out, bool out_f32);

  // In place on x(T, n_heads, head_dim), rows row_stride elements apart (0: n_heads * head_dim). pos(T) int32,
  // inv_freq(rotary_dims / 2). With norm_weight(head_dim) != 0 each head is first RMS-normed (Qwen3's q/k norm).
  // rotary_dims (even, <= head_dim; 0: head_dim): RoPE turns the leading rotary_dims of each head and passes the
  // rest through (Qwen3.5's partial RoPE, cpu::rope's rotary_dims); head_dim is the full rotation, bit for bit.
  void rope(CUstream s, CUdeviceptr x, int64_t T, int32_t n_heads, int32_t head_dim, int64_t row_stride,
            CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr norm_weight = 0, float eps = 0.f,
            int32_t rotary_dims = 0);

  // out(T, F) = silu(gate) * up, gate/up rows ld elements apart (0: F); out may be gate only when ld == F.
  void silu_mul(CUstream s, CUdeviceptr gate, CUdeviceptr up, int64_t T, int64_t F, int64_t ld, CUdeviceptr out);
  // n fp16 values at w become bf16 in place (round to nearest even): fp16 weights, once at load, for bf16
  // activations (the bf16 GEMV and tensor-core GEMMs serve them then; transformers in bf16 does the same).
  void f16_to_bf16(CUstream s, CUdeviceptr w, int64_t n);

  // Qwen3.5's gated attention, around the attention (each a plain elementwise pass):
  //   split_q_gate: src(T, 2 QD + rest), QD = n_heads * head_dim, whose first 2 QD columns are q_proj's per-head
  //                 [q (head_dim) | gate (head_dim)] and the rest k|v → qkv(T, QD + rest) = [q heads | rest] (the
  //                 layout rope_store and the attention kernels read) and gate(T, QD); copies, no rounding;
  //   sigmoid_mul:  x(n) *= sigmoid(gate(n)) in place (attention's output times the gate).
  void split_q_gate(CUstream s, CUdeviceptr src, int64_t T, int32_t n_heads, int32_t head_dim, int64_t rest,
                    CUdeviceptr qkv, CUdeviceptr gate);
  void sigmoid_mul(CUstream s, CUdeviceptr x, CUdeviceptr gate, int64_t n);

  // y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N) fp32), w bf16. y is fp32 when y_f32 (logits), else the activation
  // type; x is fp32 when x_f32 (the lm_head over fp32 normed rows; then y must be fp32), else the activation
  // type. Decode-shaped: reads w once per 8 rows of x. A row of y is bitwise the same whatever M (gemv.cuh).
  void gemv(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias,
            CUdeviceptr y, bool y_f32 = false, bool x_f32 = false);

  // y(M, I) = silu(x(M, K) · gateᵀ) ⊙ (x · upᵀ), SwiGLU's gated product in one pass over w_gate_up (2I, K) bf16:
  // gate rows [0, I), up rows [I, 2I). x and y in the activation type; silu(g) = g / (1 + exp(-g)) on the fp32
  // sums, rounded once at the store. No biases: a checkpoint with gate or up biases takes gemv + silu_mul.
  // Reads w once per 8 rows of x; the gate and up sums are bitwise gemv's.
  void gemv_swiglu(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w_gate_up, int64_t I, CUdeviceptr y);

  // The decode step's fused forms of gemv (bf16 w, M rows in chunks as gemv; residual fp32 (M, N)):
  //   gemv_residual:    residual(M, N) += (x · wᵀ + bias) rounded to the activation type (fp32 when round_f32):
  //                     bitwise what gemv into a buffer + add_rmsnorm_res32's residual add leave; and for the
  //                     next norm the new rows' sums of squares as norm_parts(N) partials per row into ss_part
  //                     (M, norm_parts(N)) fp32, and xw(M, N) = residual * next_norm_w in the activation type;
  //   gemv_norm:        y(M, N) = (rmsnorm(residual) * norm_w) · wᵀ + bias from a gemv_residual's xw and ss_part
  //                     (with N = K): inv * (xw · wᵀ) + bias, within rounding of rmsnorm_res32 + gemv (xw is
  //                     rounded before the 1 / rms scale, the norm kernel's output after it); y in the act. type;
  //   gemv_swiglu_norm: gemv_swiglu over those normed rows.
  // No norm kernel between two products, and the products' inner loop is the plain gemv's (gemv.cuh). The
  // decode step's default for up to 8 rows; fused_gemv_available() says whether
  // the kernels were found (a build without them uses the separate kernels).
  static int64_t norm_parts(int64_t n) { return (n + 7) / 8; }
  // The step's first rows as a gemv_residual leaves them for the fused norm's next product: residual(T, dim) fp32 =
  // table[ids[t]] (embed's fp32 output), xw(T, dim) = residual * norm_w in the activation type, ss_part(T,
  // norm_parts(dim)) their partial sums of squares. In place of embed + rmsnorm_res32 when the first layer's q|k|v
  // product is a fused-norm one (gemv_norm, gemv_norm_rope). has_embed_norm(): the kernel image has it.
  bool has_embed_norm() const { return fused_ && embed_norm_[0] && embed_norm_[1] && embed_norm_[2]; }
  void embed_norm(CUstream s, CUdeviceptr table, DType dt, int64_t dim, CUdeviceptr ids, int64_t T,
                  CUdeviceptr residual, CUdeviceptr norm_w, CUdeviceptr xw, CUdeviceptr ss_part);
  bool fused_gemv_available() const { return fused_; }
  // Whether this Ops launches the GEMVs' *_early kernels (gemv.cuh's EARLY: first weight loads before the PDL
  // wait; same results): under PDL unless CudaOpsTuning::early_loads is off (the op tests' other form).
  bool early_loads() const { return early_loads_; }
  void gemv_residual(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias,
                     CUdeviceptr residual, CUdeviceptr ss_part, CUdeviceptr next_norm_w, CUdeviceptr xw,
                     bool round_f32 = false);
  void gemv_norm(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M, int64_t K, float eps, CUdeviceptr w,
                 int64_t N, CUdeviceptr bias, CUdeviceptr y);
  void gemv_swiglu_norm(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M, int64_t K, float eps,
                        CUdeviceptr w_gate_up, int64_t I, CUdeviceptr y);

  // The batch-1 decode step's lm_head with the final norm folded in: logits y(1, N) fp32 = gemv_norm's product (no
  // bias) from the last gemv_residual's xw and ss_part (its next_norm_w the final norm's weight), and final_rows(1,
  // K) fp32 = rmsnorm(residual) * norm_w, what rmsnorm_res32 (out_f32) leaves up to the order of the sum of squares,
  // for a later lm_head over gathered rows. In place of rmsnorm_res32 + gemv (one launch fewer);
  // has_gemv_norm_head(): the kernel image has it.
  bool has_gemv_norm_head() const { return fused_ && gemv_norm_head_; }
  void gemv_norm_head(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t K, float eps, CUdeviceptr w, int64_t N,
                      CUdeviceptr y, CUdeviceptr residual, CUdeviceptr norm_w, CUdeviceptr final_rows);

  // gemv_norm over a fused q|k|v matrix (n_heads + 2 n_kv_heads heads of head_dim rows: N = that * head_dim) with
  // rope_store in its epilogue (gemv_rope.cuh): the q|k|v rows y = inv * (xw · wᵀ) + bias rounded to the activation
  // type, the q and k heads normed (q_norm / k_norm, 0: none) and roped in qkv, the k and v heads also written to the
  // cache rows slot[m] (slot < 0: nothing). One launch instead of two; equal to gemv_norm + rope_store up to
  // rounding (the head norm sums in another order). has_gemv_norm_rope(head_dim): the kernel image carries it for
  // that head_dim (64 or 128, sm_90 and newer: thread-block clusters); otherwise use the two.
  bool has_gemv_norm_rope(int32_t head_dim) const;
  void gemv_norm_rope(CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M, int64_t K, float eps, CUdeviceptr w,
                      CUdeviceptr bias, CUdeviceptr qkv, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                      CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr q_norm, CUdeviceptr k_norm,
                      CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache);

  // y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N) fp32) for any shape, w in `wdt` (fp32, fp16 or bf16), fp32
  // accumulation; y fp32 when y_f32, else the activation type; x as for gemv. The tiled fallback for
  // prefill-shaped products and for weights gemv does not take (gemm.cuh).
  void gemm(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, DType wdt, int64_t N, CUdeviceptr bias,
            CUdeviceptr y, bool y_f32 = false, bool x_f32 = false);

  // k_cache/v_cache (n_blocks, block_size, n_kv_heads, head_dim)[slot[t]] = k, v (T, n_kv_heads, head_dim).
  void kv_store(CUstream s, CUdeviceptr k, CUdeviceptr v, int64_t T, int32_t n_kv_heads, int32_t head_dim,
                CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache);

  // rope + rope + kv_store in one launch over a fused qkv(T, (n_heads + 2 n_kv_heads) * head_dim) whose rows
  // are [q heads | k heads | v heads]: the q heads roped in place (each first RMS-normed by q_norm(head_dim)
  // when q_norm != 0), the k heads likewise with k_norm, and the roped k and the v of token t written to
  // cache row slot[t] (slot < 0: padding, nothing stored). Same math and rounding as those three ops.
  // rotary_dims as rope's (partial RoPE; 0: head_dim), inv_freq(rotary_dims / 2).
  void rope_store(CUstream s, CUdeviceptr qkv, int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                  CUdeviceptr pos, CUdeviceptr inv_freq, float attn_scale, CUdeviceptr q_norm, CUdeviceptr k_norm,
                  float eps, CUdeviceptr slot, CUdeviceptr k_cache, CUdeviceptr v_cache, int32_t rotary_dims = 0);

  // Greedy sampling: logits(n, vocab) fp32, rows ld elements apart (0: vocab) → out_ids(n) int32, the lowest
  // id of each row's largest value, and out_logprobs(n) fp32 (0: not written), that token's log-softmax;
  // NaN, -inf and +inf as the CPU sampler treats them (sample.cuh). vocab <= 2^24. also_ids (0: none): the ids
  // written there too (the decode graph's: the next step's tokens when it is chained, Decoder::chains).
  // advance (null: none): also each row's id into host memory and its metadata one token on (step_advance.h).
  // Few rows on sm_90+: each split over a cluster of kArgmaxParts blocks (argmax_parts).
  void argmax(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, CUdeviceptr out_ids,
              CUdeviceptr out_logprobs, CUdeviceptr also_ids = 0, const StepAdvance *advance = nullptr);
  // Whether argmax splits each of n rows over a cluster: on sm_90+ (unless CudaOpsTuning::argmax_parts is off) while the rows
  // alone leave most SMs idle (n * kArgmaxParts <= 2 * SMs; larger batches keep one block a row).
  bool argmax_parts(int64_t n) const { return argmax_parts_ && n * kArgmaxParts <= 2 * int64_t(ctx_.sm_count()); }

  // Sampling with vt::sample's rules (temperature, top-k, top-p, min-p, one uniform draw; sampler.cuh):
  // logits(n, vocab) fp32, rows ld elements apart (0: vocab); rows(n) SampleRow (sample_rows.h) in device
  // memory, each with the u that sample() would draw for it: Rng::uniform() of the row's request, drawn only
  // when temperature > 0, so seeded requests stay reproducible → out_ids(n) int32 and out_logprobs(n) fp32 (0:
  // not written), the token's log-softmax of the raw logits. The token is vt::sample's on the same logits and
  // u except where a threshold falls within rounding of a cumulative sum (sampler.cuh says which); the same
  // every run. vocab <= 262,144 (the integer weights' sums stay below 2^62).
  static constexpr int64_t kSampleMaxVocab = int64_t(1) << 18;
  // also_ids and advance as argmax's (a chained sampled step: its argmax moved the metadata on, advance->moved).
  void sample(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, CUdeviceptr rows,
              CUdeviceptr out_ids, CUdeviceptr out_logprobs, CUdeviceptr also_ids = 0,
              const StepAdvance *advance = nullptr);

  // The host sampler's top-N logprobs (SampleResult::top_ids/top_logprobs; sampler.cuh): logits(n, vocab) fp32,
  // rows ld elements apart (0: vocab) → out_ids(n, top_n) int32 and out_logprobs(n, top_n) fp32, per row the
  // min(top_n, vocab) largest values (descending, ties to the lower id, NaN as -inf) and their log-softmax of
  // the raw logits; entries past min(top_n, vocab) are not written. 1 <= top_n <= 20, vocab <= 262,144.
  void top_logprobs(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, int32_t top_n,
                    CUdeviceptr out_ids, CUdeviceptr out_logprobs);

  // The logits processors of logits_processors.cpp, in place on logits(n, vocab) fp32 (rows ld elements apart,
  // 0: vocab) and bitwise what the host computes (penalties.cuh): rows(n) PenaltyRow, and per row two lists in
  // CSR form, offsets (n + 1) int32 into their arrays:
  //   seen: every distinct token id of the request's prompt and output, once (seen_ids int32), with its count
  //         in the output (seen_counts int32; 0: prompt only). rows or seen_offsets 0: no penalties.
  //   bias: logit_bias in its order (bias_ids int32, bias_values fp32; an id may repeat). bias_offsets 0: none.
  void apply_penalties(CUstream s, CUdeviceptr logits, int64_t n, int64_t vocab, int64_t ld, CUdeviceptr rows,
                       CUdeviceptr seen_offsets, CUdeviceptr seen_ids, CUdeviceptr seen_counts,
                       CUdeviceptr bias_offsets, CUdeviceptr bias_ids, CUdeviceptr bias_values);

  // Paged causal GQA attention, the contract of cpu::attention; T query rows in total. head_dim <= 256. q rows
  // are q_row_stride elements apart (0: n_heads * head_dim).
  void attention(CUstream s, CUdeviceptr q, CUdeviceptr k_cache, CUdeviceptr v_cache, const DeviceAttentionBatch &b,
                 int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, CUdeviceptr out,
                 int64_t q_row_stride = 0);

  // Split-K decode attention (attention_split.cuh): attention()'s contract, for any rows, built for decode:
  // each key and value is read once per kv head, and a row's keys are spread over enough blocks to fill the
  // GPU at batch 1. bf16 activations with head_dim 64, 128 or 256 and 16-byte aligned caches run on tensor
  // cores, the rest on CUDA cores. n_heads / n_kv_heads <= 8, head_dim <= 256.
  //   q rows are q_row_stride elements apart (0: n_heads * head_dim; e.g. q inside a fused qkv buffer); out is
  //   contiguous (T, n_heads, head_dim).
  //   max_keys: a bound on the keys of any row (its position + 1), e.g. the max context when capturing a CUDA
  //   graph. With T, n_kv_heads and the SM count it fixes the grid and the workspace; the actual lengths (in
  //   device memory) never change the launch, so a captured launch stays valid for any batch of T rows. A row
  //   past the bound is still right, in fewer, longer splits.
  //   tickets: attention_tickets_bytes(T, n_kv_heads) bytes or more, zero-filled once when allocated; every call
  //   leaves them at zero, so calls of any row counts up to the buffer's share it. workspace: scratch for the
  //   splits' partials, attention_workspace_bytes(...) bytes of the same T, n_heads, n_kv_heads, head_dim, max_keys
  //   (0: none needed, workspace may be 0), 16-byte aligned. The size is not monotonic in T (fewer splits as T
  //   grows; none once T * n_kv_heads >= 2 SMs): one workspace for several batch sizes takes the largest. Calls
  //   that share either buffer must not run concurrently (one per stream). (The tickets once sat at the start of
  //   the workspace, the partials after them: a call's partials then lay where a later call of more rows counted
  //   its tickets, which then never came back to zero and merged partials that were not there.)
  //   Few rows (attention_cluster) take the cluster form, whose splits of a (row, kv head) merge in distributed
  //   shared memory (8 splits: 1.034x at Qwen3-0.6B batch 1 on the H200 with ~400 keys); where that grid has fewer
  //   blocks than SMs, only up to kClusterMaxKeys keys, past which the ticket form, whose split count grows with
  //   max_keys, is faster (the cluster form at batch 1 and an 8,192-token prompt: 0.75x).
  static constexpr int32_t kClusterMaxKeys = 768;  // H200, 0.6B b1: cluster 1.012x at 384-640 keys, 0.98x at 1,024+
  bool attention_cluster(int64_t T, int32_t n_kv_heads, int32_t head_dim, int32_t max_keys) const;
  int32_t attention_splits(int64_t T, int32_t n_kv_heads, int32_t max_keys) const;  // the grid's splits per row
  size_t attention_workspace_bytes(int64_t T, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                   int32_t max_keys) const;
  // The same for a GPU of sm_count multiprocessors, without a context (memory estimates before loading).
  static int32_t attention_splits(int sm_count, int64_t T, int32_t n_kv_heads, int32_t max_keys);
  static size_t attention_workspace_bytes(int sm_count, int64_t T, int32_t n_heads, int32_t n_kv_heads,
                                          int32_t head_dim, int32_t max_keys);
  static size_t attention_tickets_bytes(int64_t T, int32_t n_kv_heads) { return size_t(T) * size_t(n_kv_heads) * 4; }
  void attention_decode(CUstream s, CUdeviceptr q, int64_t q_row_stride, CUdeviceptr k_cache, CUdeviceptr v_cache,
                        const DeviceAttentionBatch &b, int64_t T, int32_t n_heads, int32_t n_kv_heads,
                        int32_t head_dim, float scale, int32_t max_keys, CUdeviceptr tickets, CUdeviceptr workspace,
                        size_t workspace_bytes, CUdeviceptr out);

  // Prefill attention on tensor cores (attention_prefill.cuh): attention()'s contract and arguments, for bf16
  // activations and head_dim 64, 128 or 256 only (has_attention_prefill; else call attention()). q rows are
  // q_row_stride elements apart (0: n_heads * head_dim; a multiple of 8, e.g. q inside a fused qkv buffer);
  // q, the caches and out 16-byte aligned; scale > 0. The work is a list of query-row tiles, never spanning two
  // sequences: tiles(n_tiles, 3) int32 on the device, (seq, first row, rows), as prefill_tiles builds it for
  // the same batch. n_tiles <= 65535.
  static constexpr int32_t kPrefillTileRows = 64;  // attention_prefill.cuh's kPrefillRows
  // Fills *tiles (n_tiles * 3 int32) from the host copies of seq_q_start (n_seqs + 1) and, when given,
  // seq_pos0 (n_seqs), and returns n_tiles: each sequence's rows cut into runs of kPrefillTileRows, the tiles
  // with the most keys first (without seq_pos0: the most rows into their sequence) so the long ones start early.
  static int32_t prefill_tiles(const int32_t *seq_q_start_host, int32_t n_seqs, std::vector<int32_t> *tiles,
                               const int32_t *seq_pos0_host = nullptr);
  bool has_attention_prefill(int32_t head_dim) const;
  void attention_prefill(CUstream s, CUdeviceptr q, int64_t q_row_stride, CUdeviceptr k_cache, CUdeviceptr v_cache,
                         const DeviceAttentionBatch &b, int64_t T, int32_t n_heads, int32_t n_kv_heads,
                         int32_t head_dim, float scale, CUdeviceptr tiles, int32_t n_tiles, CUdeviceptr out);

 private:
  Context &ctx_;
  Act act_;
  CUfunction embed_[2][3];  // [out_f32][table DType]
  CUfunction embed_norm_[3] = {};  // [table DType]; null where the image lacks them
  CUfunction rmsnorm_, add_rmsnorm_, rope_, silu_mul_, kv_store_, split_q_gate_, sigmoid_mul_, f16_to_bf16_;
  CUfunction rmsnorm_res32_, rmsnorm_f32_, add_rmsnorm_res32_[2][2];  // [x_f32][out_f32]
  CUfunction gemv_[2][4];       // [y_f32][log2 M]
  CUfunction gemv_x32_[4];      // fp32 x and y, [log2 M]
  CUfunction gemv_swiglu_[4];   // [log2 M]
  CUfunction gemv_norm_[4], gemv_swiglu_norm_[4];  // [log2 M]
  CUfunction gemv_res_[2][4];   // [round_f32][log2 M]
  CUfunction gemv_norm_head_ = nullptr;  // one row; null where the image lacks it
  CUfunction gemv_norm_rope_[2][4] = {};  // [head_dim 64, 128][log2 M]; null where the image lacks them
  void launch_gemv_norm(CUfunction const (&f)[4], CUstream s, CUdeviceptr xw, CUdeviceptr ss_part, int64_t M,
                        int64_t K, float eps, CUdeviceptr w, int64_t N, CUdeviceptr bias, CUdeviceptr y,
                        bool with_bias);
  int split_keys_ = 64;  // the shortest decode attention split (attention_split.cuh; CudaOpsTuning::split_keys)
  bool early_loads_ = false;
  bool fused_ = false;          // the kernel image carries the fused-norm GEMVs
  CUfunction gemm_[2][3];       // [y_f32][weight DType]
  CUfunction gemm_x32_[3];      // fp32 x and y, [weight DType]
  CUfunction attention_[2];     // head_dim <= 128, <= 256
  CUfunction attention_split_[2];           // split-K on CUDA cores: head_dim <= 128, <= 256
  CUfunction attention_split_mma_[3] = {};  // split-K on tensor cores, bf16 activations only: head_dim 64, 128, 256
  CUfunction attention_split_cluster_[3] = {};  // the same, the splits one cluster (sm_90+, few rows)
  CUfunction attention_prefill_[3] = {};  // bf16 activations only: head_dim 64, 128, 256
  CUfunction rope_store_, argmax_, sample_, penalties_, top_logprobs_;
  CUfunction argmax_parts_ = nullptr;  // sm_90+: a row over a cluster of kArgmaxParts blocks
  static constexpr unsigned kArgmaxParts = 8;  // sample.cuh's
};

}  // namespace vt::cuda
