// The CUDA backend's executor (the engine's Decoder interface, models/decoder.h): the architecture's model
// (models/registry.h) run over CudaModelOps (backend/cuda/cuda_model_ops.h, which owns the weights, the activations
// and how each op runs) on one GPU, and around it what a step needs besides the model: the context and stream, the
// paged KV cache (in the activation type, with the CPU's layout (layer, K|V, n_blocks, block_size, n_kv_heads,
// head_dim), mapped in chunks as it grows: cuda::KvPool), the step's integers, CUDA graphs, the lm_head and sampling.
//
// Decode steps (every sequence one row) up to the largest graph bucket replay a CUDA graph of the whole step:
// the model's forward, the lm_head over every row and the greedy argmax; the step's integers go up in one async copy
// from pinned memory into buffers at fixed addresses first. Other steps launch the same ops directly. The
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
#include "backend/cuda/tensor_gemm.h"
#include "backend/cuda/cuda_model_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/graphs.h"
#include "backend/cuda/kv_pool.h"
#include "backend/cuda/staged_upload.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "loader/weights.h"
#include "models/decoder.h"
#include "models/model.h"
#include "models/registry.h"
#include "tuning.h"

namespace vt {

struct CudaDecoderParams {
  cuda::Act act = cuda::Act::F32;
  int32_t max_tokens = 0;      // rows of one forward
  int32_t max_seqs = 0;        // sequences of one forward
  int32_t max_logit_rows = 0;  // rows of one project()
  int32_t n_blocks = 0, block_size = 0;  // n_blocks: the KV pool's ceiling
  int32_t n_blocks_base = 0;             // blocks usable from the load on and kept when idle; 0: n_blocks
  bool kv_grows = false;                 // map the pool in chunks as blocks are needed (cuda::KvPool); false: all at load
  StateLayout state;            // what each layer keeps per sequence: sizes the KV pool (and the state slots)
  int32_t n_state_slots = 0;    // state slots (fp32, state.slot_elems() each), in slots_: their ceiling
  int32_t n_state_slots_base = 0;  // slots usable from the load on and kept when idle; 0: n_state_slots
  int64_t state_slot_stride = 0;   // bytes from one slot to the next (cuda::slot_layout); 0: a slot's bytes
  bool slots_grow = false;         // map the slots in chunks as they are needed; false: all at load
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
  // The model's activations and the ops' scratch are sized by the model's own declarations (a sizing CudaModelOps),
  // so this is what the constructor allocates, to the byte (golden_cuda checks it).
  static Workspace plan_workspace(const ModelConfig &c, const CudaDecoderParams &p, int sm_count, bool with_blas);
  // Whether this model's engine applies logits processors on the device (CudaTuning::penalties_on_device, and a
  // vocabulary the device sampler takes): then the plan and the constructor both count kProcBytes of staging.
  static bool processors_on_device(const ModelConfig &c, const CudaTuning &t);

  // Uploads every tensor of `w` (views into `ck`'s mapping), releasing each tensor's mapped pages once it is on
  // the device, and allocates the KV pool and the activations, then captures the decode graphs.
  // `progress(stage, done, total)`: "weights" as they go up (MiB of total MiB), "cuda graphs" before (0 of 1) and
  // after (1 of 1) the capture. ck: whose pages are given back (null: none). make: the model to run (tests); null:
  // the registry's for the config's architecture.
  using Progress = std::function<void(const char *stage, int done, int total)>;
  CudaDecoder(const ModelConfig &config, const Weights &w, const Checkpoint *ck, const CudaDecoderParams &p,
              const Progress &progress, decltype(ModelEntry::make) make = nullptr);
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
  int64_t weight_device_bytes() const { return mops_->weight_bytes(); }
  // The KV pool's ceiling and the state slots' (every slot, stride apart).
  int64_t kv_bytes() const { return kv_->ceiling_bytes() + (slots_ ? slots_->ceiling_bytes() : 0); }
  // The KV pool grows and shrinks in chunks (cuda::KvPool; Decoder's kv_* say how the engine uses them).
  int32_t kv_chunk_blocks() const override { return kv_->chunk_blocks(); }
  int32_t kv_mapped_blocks() const override { return kv_->mapped_blocks(); }
  int32_t grow_kv(int32_t blocks) override;
  int32_t trim_kv(int32_t blocks) override;
  int64_t kv_resident_bytes() const override { return kv_->mapped_bytes() + state_slot_resident_bytes(); }
  // The state slots grow and shrink the same way (a KvPool of one plane whose blocks are slots).
  int32_t state_slot_chunk() const override { return slots_ ? slots_->chunk_blocks() : 0; }
  int32_t state_slots_mapped() const override { return slots_ ? slots_->mapped_blocks() : -1; }
  int32_t grow_state_slots(int32_t slots) override;
  int32_t trim_state_slots(int32_t slots) override;
  int64_t state_slot_resident_bytes() const override { return slots_ ? slots_->mapped_bytes() : 0; }
  int64_t workspace_bytes() const { return workspace_bytes_ + mops_->workspace_bytes(); }
  int64_t pinned_bytes() const { return pinned_bytes_; }  // page-locked host memory held (plan_workspace's pinned)
  BackendReport report() const override;
  int32_t graph_count() const { return graphs_.executables() + short_graphs_.executables(); }
  int64_t graph_bytes() const { return graphs_.device_bytes() + short_graphs_.device_bytes(); }

 private:
  // The integers of one step in device memory (meta_buf_) and in its staging (meta_pinned_), in int32 elements: the
  // lm_head's row list (max_logit_rows) first, then packed for the step's t rows and s sequences, so that a step
  // uploads one short range: tokens, positions, slots (t each), q_start (s + 1), pos0 (s), state slots (s: each
  // sequence's state slot for the recurrent layers, -1 for none and for padding), the block tables (s rows of
  // table_width), prefill attention tiles. A captured step of bucket B reads them where (B, B) puts them. A recurrent
  // layer reads a sequence as fresh where its pos0 is 0, so the step advance (which moves pos0 on) keeps that right
  // and the state slots, which a running sequence keeps, never change between chained steps.
  struct MetaLayout {
    size_t rows, tokens, positions, slots, q_start, pos0, state_slots, tables, tiles;
  };
  static MetaLayout meta_layout(size_t max_rows, size_t t, size_t s, size_t table_width);
  struct Meta {
    CUdeviceptr tokens, positions, slots, q_start, pos0, state_slots, tables, tiles, rows;
  };
  void set_meta(int32_t t, int32_t s);  // layout_ and meta_ for a step of t rows and s sequences

  CUdeviceptr scratch(size_t elems, size_t elem_size);
  // The model's forward over a step of T rows of n_seqs sequences, whose integers are in meta_ (block tables
  // table_width_ wide). max_keys bounds any row's keys (the attention's split count depends on it, never on device
  // values); fold_norm: the lm_head will apply the final norm (a captured batch-1 step, head_norm_).
  void run_model(int32_t T, int32_t n_seqs, int32_t max_keys, bool multi_row, int32_t n_tiles, bool fold_norm);
  // logits_(n, vocab) = lm_head(the model's output rows gathered by the device row list `rows`); then, when
  // with_argmax, ids_/lps_ = their greedy token and logprob.
  // step: a captured decode step's head (rows = iota_, 0 .. n - 1), which reads the output rows in place (or, lazily
  // normed, folds the final norm in: Ops::gemv_norm_head) and also leaves its picks as the next step's tokens
  // (Decoder::chains).
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

  ModelConfig c_;
  CudaDecoderParams p_;
  // VT_CUDA_SKIP's argmax (experiments builds; CudaTuning::skip): the captured step leaves it out. For timing only; the
  // model's ops leave out the rest.
  bool skip_argmax_ = false;
  // cudaGraphs.capture 'first-use' (CudaDecoderParams::graph_first_use): no
  // graph is captured at load; each bucket's is captured by the first decode step that needs it, so the load is
  // shorter (H200, 0.6B shape: load -> first token 151-174 ms against 206-210 ms; 8B unchanged; decode unchanged)
  // and an engine that decodes one sequence at a time holds one graph.
  bool graphs_lazy_ = false;
  // VT_CUDA_REPLAY=N (experiments builds, timing only): each captured decode step's graph is launched N times in a
  // row. A step's graph is idempotent (it starts from the embedding, writes the same cache rows and outputs each time), so results do not
  // change, and (time at N = 2) - (time at N = 1) is the GPU time of a step without the host's share between steps.
  int replays_ = 1;
  // A captured batch-1 step folds the final norm into its lm_head (Ops::gemv_norm_head: one launch fewer; bf16
  // activations and lm_head, where the kernel image has it): the model's ops leave the output lazily normed then.
  bool head_norm_ = false;
  // Declared first, destroyed last: every buffer below belongs to this context.
  std::unique_ptr<cuda::Context> ctx_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::Ops> ops_;

  std::unique_ptr<cuda::TensorGemm> gemm_;  // our tensor-core GEMMs (bf16 activations; null without them)
  std::unique_ptr<cuda::CublasLt> blas_;    // loaded only for VT_CUDA_GEMM=cublaslt or without gemm_
  std::unique_ptr<CudaModelOps> mops_;       // the weights, the activations, the ops
  std::unique_ptr<Model> model_;             // after mops_, which holds what it binds
  std::vector<cuda::DeviceBuffer> buffers_;  // the executor's buffers (scratch())
  int64_t workspace_bytes_ = 0, pinned_bytes_ = 0;

  std::unique_ptr<cuda::KvPool> kv_;  // (attention layer, K|V, n_blocks, block_size, n_kv_heads, head_dim), mapped in chunks
  // (n_state_slots, state_slot_stride / 4) fp32, of which each slot's first state.slot_elems(), mapped in chunks of
  // slots; null for a model without state slots.
  std::unique_ptr<cuda::KvPool> slots_;

  // The head's and the sampler's buffers
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
  int32_t attn_rows_ = 0;                  // Workspace::attn_rows: decode attention's rows

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
