// The dense decoder of models/dense_model.h on one GPU: the same forward() over the same weights, with the
// weights, the paged KV cache and the activations in device memory and every op from backend/cuda. Activations
// are fp32 (the debugging mode whose results match the CPU backend to rounding) or bf16 (fp32 arithmetic inside
// every kernel). With bf16 activations only what feeds a product (the normed rows, the attention output, the
// SwiGLU product), the products' outputs and q/k/v are bf16: the residual stream, the final normed rows (the
// lm_head's input) and the logits are fp32, and attention's softmax and accumulators are fp32. The KV cache is
// in the activation type, with the CPU's paged layout
// (layer, K|V, n_blocks, block_size, n_kv_heads, head_dim).
//
// Fused for the decode step: q|k|v are one matrix (one product, then one kernel for RoPE, Qwen3's q/k norm
// and the KV store, or, with the fused norm on sm_90+, all of that in the product's epilogue: qkv_rope_) and gate|up
// are one matrix (with bf16 weights and few rows, one GEMV that also applies
// SiLU·mul). Matrices stay in their stored dtype and are widened in the kernels: the decode GEMV for bf16
// weights and up to gemv_rows_max() rows (4 with cuBLASLt, 8 without); cuBLASLt (when the machine has it) for
// bf16 weights and activations and more rows; the tiled GEMM for everything else. Kernels that follow one
// another in a decode step overlap their launch (programmatic dependent launch, Hopper and newer).
//
// Decode steps (every sequence one row) up to the largest graph bucket replay a CUDA graph of the whole step:
// the layers, the lm_head over every row and the greedy argmax; the step's integers go up in one async copy
// from pinned memory into buffers at fixed addresses first. Other steps launch the same kernels directly. The
// graph's argmax also writes its picks into the token slots, so a chained next step (Decoder::chains, the engine's
// overlapped greedy decode) uploads everything but the tokens and is launched before these picks are read.
//
// Threads: built on the loading thread, run on the engine's step thread; each entry point makes the context
// current first. Any CUDA failure throws vt::Error (the step loop ends that batch's requests with it).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/graphs.h"
#include "backend/cuda/staged_upload.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "loader/weights.h"
#include "models/decoder.h"
#include "tuning.h"

namespace vt {

struct CudaDecoderParams {
  cuda::Act act = cuda::Act::F32;
  int32_t max_tokens = 0;      // rows of one forward
  int32_t max_seqs = 0;        // sequences of one forward
  int32_t max_logit_rows = 0;  // rows of one project()
  int32_t n_blocks = 0, block_size = 0;
  int32_t max_context = 0;             // keys per sequence at most (sizes block tables and attention splits)
  std::vector<int32_t> graph_buckets;  // decode batch sizes to capture, ascending; empty = no graphs
  bool graph_dedup = false;
  bool graph_first_use = false;  // capture each bucket at its first decode step, not at load
  CudaTuning tuning;             // the engine's switches (tuning.h), as the plan read them
};

class CudaDecoder : public Decoder {
  using CUdeviceptr = cuda::CUdeviceptr;

 public:
  // The device memory besides weights and KV cache, and the layout facts that follow from the params. One
  // function for the constructor and for memory estimates made before loading (memory_plan.cpp).
  struct Workspace {
    int64_t total = 0;       // bytes
    int64_t pinned = 0;      // page-locked host bytes (the step's staging), apart from total
    int64_t attn_bytes = 0;  // split-K attention partials
    int32_t attn_rows = 0, table_width = 0;
    size_t meta_elems = 0;   // int32s of the step's integers (meta_layout)
  };
  static Workspace plan_workspace(const ModelConfig &c, const CudaDecoderParams &p, int sm_count, bool with_blas);
  // Whether this model's engine applies logits processors on the device (CudaTuning::penalties_on_device, and a
  // vocabulary the device sampler takes): then the plan and the constructor both count kProcBytes of staging.
  static bool processors_on_device(const ModelConfig &c, const CudaTuning &t);

  // Uploads every tensor of `w` (views into `ck`'s mapping), releasing each tensor's mapped pages once it is on
  // the device, and allocates the KV pool and the activations, then captures the decode graphs.
  // `progress(stage, done, total)`: "weights" after each layer, "cuda graphs" before (0 of 1) and after (1 of 1)
  // the capture.
  using Progress = std::function<void(const char *stage, int done, int total)>;
  CudaDecoder(const ModelConfig &config, const Weights &w, const Checkpoint &ck, const CudaDecoderParams &p,
              const Progress &progress);
  ~CudaDecoder() override;

  void forward(const ForwardBatch &b) override;
  void project(const int32_t *rows, int32_t n, float *logits) override;
  bool chains(int32_t n) const override;
  bool chains_sampled() const override { return chain_rows_pinned_.device_ptr() != 0; }
  void chain_begin(int32_t n, const cuda::SampleRow *params) override;
  void chain_end(int32_t *ids) override;
  bool greedy(const int32_t *rows, int32_t n, int32_t *ids) override;
  // Ops::sample and Ops::top_logprobs on the rows' logits (unless VT_CUDA_SAMPLE=0: the host sampler). golden_cuda
  // checks it against the host sampler: the same ids, logprobs within 1e-4, alone and batched.
  bool samples_on_device() const override { return sample_on_device_; }
  void sample(const int32_t *rows, int32_t n, const cuda::SampleRow *params, int32_t top_n, int32_t *ids,
              float *logprobs, int32_t *top_ids, float *top_lps, const ProcessorLists *lists = nullptr) override;
  // The logits processors on the device too (Ops::apply_penalties, unless VT_CUDA_PENALTIES=0), when each chunk
  // of max_logit_rows rows' lists fits kProcBytes; golden_cuda checks them against the host's with the sampling.
  bool processors_on_device() const override { return proc_dev_ != 0; }
  bool applies_processors(const ProcessorLists &lists) const override;

  const std::string &device_name() const { return ctx_->name(); }
  const cuda::Context &context() const { return *ctx_; }  // its figures for memory reports (mem_info, name)
  int64_t weight_device_bytes() const { return weight_bytes_; }
  int64_t kv_bytes() const { return int64_t(kv_.bytes()); }
  int64_t workspace_bytes() const { return workspace_bytes_; }
  int64_t pinned_bytes() const { return pinned_bytes_; }  // page-locked host memory held (plan_workspace's pinned)
  BackendReport report() const override;
  int32_t graph_count() const { return graphs_.executables() + short_graphs_.executables(); }
  int64_t graph_bytes() const { return graphs_.device_bytes() + short_graphs_.device_bytes(); }

 private:
  struct DMatrix {  // (rows, cols) row-major on the device, stored dtype
    CUdeviceptr ptr = 0;
    DType dtype = DType::BF16;
    int64_t rows = 0, cols = 0;
  };
  struct DLayer {
    CUdeviceptr attn_norm = 0, mlp_norm = 0, q_norm = 0, k_norm = 0;  // fp32; q/k norm 0 unless Qwen3
    DMatrix qkv, o, gate_up, down;  // qkv: rows q | k | v; gate_up: rows gate | up
    CUdeviceptr qkv_bias = 0, o_bias = 0, gate_up_bias = 0, down_bias = 0;  // fp32, 0: none
  };
  // The integers of one step in device memory (meta_buf_) and in its staging (meta_pinned_), in int32 elements: the
  // lm_head's row list (max_logit_rows) first, then packed for the step's t rows and s sequences, so that a step
  // uploads one short range: tokens, positions, slots (t each), q_start (s + 1), pos0 (s), the block tables (s rows
  // of table_width), prefill attention tiles. A captured step of bucket B reads them where (B, B) puts them.
  struct MetaLayout {
    size_t rows, tokens, positions, slots, q_start, pos0, tables, tiles;
  };
  static MetaLayout meta_layout(size_t max_rows, size_t t, size_t s, size_t table_width);
  struct Meta {
    CUdeviceptr tokens, positions, slots, q_start, pos0, tables, tiles, rows;
  };
  void set_meta(int32_t t, int32_t s);  // layout_ and meta_ for a step of t rows and s sequences

  DMatrix upload(const Matrix &m, const Checkpoint &ck);  // through stager_ while the constructor uploads
  DMatrix upload_stacked(std::initializer_list<const Matrix *> parts, const Checkpoint &ck);  // rows concatenated
  CUdeviceptr upload(const std::vector<float> &v);  // 0 for an empty vector
  CUdeviceptr upload_stacked(std::initializer_list<const std::vector<float> *> parts);  // 0 when all empty
  CUdeviceptr scratch(size_t elems, size_t elem_size);
  void linear(CUdeviceptr x, int32_t T, const DMatrix &m, CUdeviceptr bias, CUdeviceptr y, bool y_f32 = false,
              bool x_f32 = false);
  // Rows up to which bf16 products use the GEMV: beyond 4 it re-reads x per weight chunk and cuBLASLt (when
  // present) streams the weights faster; without cuBLASLt the GEMV still beats the tiled GEMM up to 8.
  int32_t gemv_rows_max() const { return blas_ ? 4 : 8; }
  // Every layer over T rows of n_seqs sequences, whose integers are in meta_ (block tables table_width_ wide).
  // max_keys bounds any row's keys (the attention's split count depends on it, never on device values).
  void layers(int32_t T, int32_t n_seqs, int32_t max_keys, bool multi_row, int32_t n_tiles);
  // logits_(n, vocab) = lm_head(final_ rows gathered by the device row list `rows`); then, when
  // with_argmax, ids_/lps_ = their greedy token and logprob.
  // step: a captured decode step's head (rows = iota_, 0 .. n - 1), which reads final_ in place and also leaves its
  // picks as the next step's tokens (Decoder::chains).
  void head(CUdeviceptr rows, int32_t n, bool with_argmax, bool step = false);
  // Whether rows are 0 .. n-1 of the last graph replay, whose head already left their logits and greedy ids.
  bool replayed(const int32_t *rows, int32_t n) const;
  // head() over host row indices (m <= max_logit_rows): copies them up first.
  void head_of(const int32_t *rows, int32_t m, bool with_argmax);
  // Fills the pinned staging area for a step (padded to n_pad rows/sequences) and copies it up.
  void stage(const ForwardBatch &b, int32_t n_pad, int32_t n_tiles = 0);  // n_tiles: tiles_ goes up too
  // Whether a chained decode step's metadata is already on the device, as the previous step's argmax left it
  // (step_advance_): the same rows one token on, and every row's next KV slot in the block tables uploaded last.
  bool advanced_on_device(const ForwardBatch &b, int32_t n_pad) const;
  // The current step's cuda::StepAdvance: for its argmax (moved false), or for a chained sampled step's sampler
  // after that argmax (moved true).
  cuda::StepAdvance advance_args(bool moved) const;
  void capture_graphs();
  // What a decode graph of bucket B holds: the layers (their attention for rows of up to max_keys keys) and the head,
  // all rows padding.
  void record_step(int32_t B, int32_t max_keys);
  CUdeviceptr k_cache(int l) const { return kv_.ptr() + CUdeviceptr(2 * l) * kv_layer_bytes_; }
  CUdeviceptr v_cache(int l) const { return kv_.ptr() + CUdeviceptr(2 * l + 1) * kv_layer_bytes_; }

  ModelConfig c_;
  CudaDecoderParams p_;
  float rope_scale_ = 1.f;
  bool sub_f32_ = false;  // o/down outputs fp32 (VT_CUDA_SUBLAYER_F32=1, debugging; bf16 activations only)
  // VT_CUDA_SKIP (experiments builds; CudaTuning::skip): the step leaves those launches out (argmax: the captured
  // step's). For timing only (what a kind of launch costs inside the captured step, the bound on fusing it away):
  // the results are wrong, and the engine says so on stderr when it loads.
  unsigned skip_ = 0;
  bool skips(CudaSkip k) const { return (skip_ & k) != 0; }
  // cudaGraphs.capture 'first-use' (CudaDecoderParams::graph_first_use): no
  // graph is captured at load; each bucket's is captured by the first decode step that needs it, so the load is
  // shorter (H200, 0.6B shape: load -> first token 151-174 ms against 206-210 ms; 8B unchanged; decode unchanged)
  // and an engine that decodes one sequence at a time holds one graph.
  bool graphs_lazy_ = false;
  // VT_CUDA_REPLAY=N (experiments builds, timing only): each captured decode step's graph is launched N times in a
  // row. A step's graph is idempotent (it starts from the embedding, writes the same cache rows and outputs each time), so results do not
  // change, and (time at N = 2) - (time at N = 1) is the GPU time of a step without the host's share between steps.
  int replays_ = 1;
  // The fused norm: steps of up to gemv_rows_max() rows add each
  // sublayer's output into the residual in the epilogue of its product (o / down: Ops::gemv_residual, which also leaves
  // the rows' partial sums of squares in norm_ss_ and the rows times the next norm's weight in normed_) and scale the
  // next product's sums by 1 / rms (q|k|v / gate|up: Ops::gemv_norm), so no norm kernel runs between the layers'
  // products (the first norm runs in the embedding gather, Ops::embed_norm, where the kernel image has it), when every
  // layer's products take the GEMV (bf16 weights, no gate/up biases). Within rounding of the
  // separate kernels. On the H200 at batch 1: 1.12x on the Qwen3-8B shape, 1.03x on 0.6B (bench/RESULTS.md; gemv.cuh
  // has the earlier forms' figures).
  bool fused_norm_ = true;  // cleared at load when a layer's products cannot all take the GEMV
  bool fused_step(int32_t T) const;
  // With the fused norm, the layers also fold RoPE, the q/k norm and the KV store into the q|k|v product's
  // epilogue (Ops::gemv_norm_rope: one launch a layer fewer) where the kernel image has it for the head_dim (sm_90+)
  // and its blocks fit twice in the SMs; else gemv_norm + rope_store.
  bool qkv_rope_ = true;
  // With the fused norm, a captured batch-1 step also folds the final norm into its lm_head (Ops::gemv_norm_head: one
  // launch fewer; bf16 activations, where the kernel image has it).
  // head_norm_now_: set by record_step while it records such a step (layers() then leaves the norm to head()).
  bool head_norm_ = false, head_norm_now_ = false;
  // Declared first, destroyed last: every buffer below belongs to this context.
  std::unique_ptr<cuda::Context> ctx_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::Ops> ops_;

  std::vector<cuda::DeviceBuffer> buffers_;  // weights and activations, owned here
  cuda::StagedUpload *stager_ = nullptr;     // the constructor's, while it uploads the weights
  int64_t weight_bytes_ = 0, workspace_bytes_ = 0, pinned_bytes_ = 0;
  DMatrix embed_, lm_head_;
  std::vector<DLayer> layers_;
  CUdeviceptr final_norm_ = 0, inv_freq_ = 0;  // (hidden), (head_dim / 2) fp32

  cuda::DeviceBuffer kv_;        // (layer, K|V, n_blocks, block_size, n_kv_heads, head_dim)
  CUdeviceptr kv_layer_bytes_ = 0;

  // RunState, activation type unless said otherwise
  CUdeviceptr residual_ = 0;               // (T, hidden) fp32
  // The fused norm's partial sums of squares: (rows, Ops::norm_parts(hidden)) fp32 for steps of up to
  // kNormSsRows rows (gemv_rows_max()'s largest).
  static constexpr int64_t kNormSsRows = 8;
  CUdeviceptr norm_ss_ = 0;
  CUdeviceptr normed_ = 0;                 // (T, hidden) the next product's input
  CUdeviceptr final_ = 0;                  // (T, hidden) fp32, the final norm's rows (normed_ when fp32)
  CUdeviceptr qkv_ = 0;                    // (T, (n_heads + 2 n_kv_heads) * head_dim)
  CUdeviceptr attn_ = 0;                   // (T, n_heads * head_dim)
  CUdeviceptr proj_ = 0;                   // (T, hidden) (fp32 when sub_f32_)
  CUdeviceptr gate_up_ = 0;                // (T, 2 intermediate) (only when the fused SwiGLU GEMV cannot run)
  CUdeviceptr act_ = 0;                    // (T, intermediate) silu(gate) * up
  CUdeviceptr last_ = 0;                   // (max_logit_rows, hidden) fp32, rows gathered for the lm_head
  CUdeviceptr last_act_ = 0;               // (max_logit_rows, hidden) the same rows in bf16 (cuBLASLt's input)
  CUdeviceptr logits_ = 0;                 // (max_logit_rows, vocab) fp32
  CUdeviceptr ids_ = 0, lps_ = 0;          // (max_logit_rows) int32 / fp32: greedy tokens and logprobs
  CUdeviceptr sample_rows_ = 0;            // (max_logit_rows) cuda::SampleRow, the sampled rows' parameters
  CUdeviceptr top_ids_ = 0, top_lps_ = 0;  // (max_logit_rows, kMaxTopLogprobs) int32 / fp32
  static constexpr int32_t kMaxTopLogprobs = 20;
  // sample_pinned_ per row: a SampleRow up, or the id, logprob and top list down (plan_workspace counts it too)
  static constexpr size_t kSampleStagingRowBytes =
      sizeof(cuda::SampleRow) > 8 + 8 * kMaxTopLogprobs ? sizeof(cuda::SampleRow) : 8 + 8 * kMaxTopLogprobs;
  bool sample_on_device_ = true;
  static constexpr size_t kProcBytes = size_t(4) << 20;  // one chunk's processor lists, staged and on the device
  cuda::PinnedBuffer proc_pinned_;                       // not allocated with VT_CUDA_PENALTIES=0
  CUdeviceptr proc_dev_ = 0;
  CUdeviceptr attn_ws_ = 0;                // split-K decode attention partials, for up to attn_ws_rows_ rows
  int32_t attn_ws_rows_ = 0;
  size_t attn_ws_bytes_ = 0;
  std::unique_ptr<cuda::CublasLt> blas_;   // null or unavailable: own kernels only
  std::string attn_mode_;                  // VT_CUDA_ATTN: "" (auto), "simple", "noprefill"

  // The step's integers: pinned staging on the host, the same layout in device memory.
  int32_t table_width_ = 0;                // block-table entries per sequence (max_context / block_size)
  size_t meta_elems_ = 0;
  MetaLayout layout_{};  // of the step staged last (set_meta)
  cuda::DeviceBuffer meta_buf_;
  cuda::PinnedBuffer meta_pinned_, out_pinned_;
  cuda::PinnedBuffer sample_pinned_;       // SampleRows up, then ids | logprobs | top ids | top logprobs down
  std::unique_ptr<cuda::Event> staged_;    // recorded after each step's upload from meta_pinned_
  // meta_pinned_ mirrors the step's metadata on the device (also when it was not uploaded: step_advance_), for
  // staged_pad_ rows of which staged_rows_ are real.
  int32_t staged_pad_ = 0, staged_rows_ = 0;
  // The overlapped decode's reads of greedy picks (chain_begin/end): out_pinned_ holds two slots of max_logit_rows
  // ids, each with the event recorded after the step; begun_ lists the begun reads (slot, rows), oldest first.
  std::unique_ptr<cuda::Event> picked_[2];
  std::vector<std::pair<int, int32_t>> begun_;
  int next_slot_ = 0;
  // The captured steps' argmax writes the picks into out_pinned_ (mapped; a row's slot is its position's parity,
  // begun_positions_ the positions of each begun read) and moves the metadata on by a token (cuda::StepAdvance), so
  // a chained step needs neither the copy of the picks nor the upload (stage) between the two graphs. On with the
  // overlap, off while timing replays (VT_CUDA_REPLAY: a step would no longer be idempotent).
  bool step_advance_ = true;
  std::vector<int32_t> begun_positions_[2];
  // A chained sampled step's SampleRows (two slots of max_logit_rows, the slot its read's), mapped: the sampler reads
  // them where the host wrote them, no copy between the steps. Mapped (chains_sampled()) with the step advance and
  // sampling on the device.
  cuda::PinnedBuffer chain_rows_pinned_;
  Meta meta_{};
  std::vector<int32_t> tiles_;             // prefill attention tiles of the step (host)
  cuda::DeviceBuffer iota_;                // 0, 1, 2, ...: the row list of a decode step

  cuda::DecodeGraphs graphs_;
  // graphs_ is recorded for rows of up to max_context keys. The steps whose rows all have at most
  // Ops::kClusterMaxKeys keys replay these instead where their bucket has one: the buckets whose decode attention
  // takes the cluster form at such contexts only (Ops::attention_cluster; batch 1 and 2 on Qwen3's shapes on an H200),
  // recorded for that bound. None where the cluster form is off (no cluster kernel, fp32) or covers max_context too.
  cuda::DecodeGraphs short_graphs_;
  int32_t graph_rows_ = 0;                 // rows of the last forward() when it replayed a graph, else 0
  int32_t head_rows_ = 0;                  // rows whose logits (and greedy ids) head() left in logits_/ids_
};

}  // namespace vt
