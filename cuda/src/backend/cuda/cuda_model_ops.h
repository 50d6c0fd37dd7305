// The CUDA backend's ModelOps (models/model_ops.h): a model's ops as the kernels of backend/cuda, with the weights,
// the activations and the ops' scratch in device memory. The executor (backend/cuda/cuda_decoder: context, stream,
// KV cache, the step's integers, graphs, the lm_head and sampling) builds it, gives it each step (begin_step) and
// runs the model's forward() over it, directly or while capturing a graph.
//
// How a linear runs is decided here, per layer and per step, from the weights' format and the step's rows:
// bf16 weights and up to gemv_rows_max() rows take the decode GEMV (the selection table's row limit, gemm_table.h);
// more rows take our tensor-core GEMMs (TensorGemm: mma.sync tiles, wgmma on Hopper; the table's tile and split-K
// for the rows), or cuBLASLt where ours are not there (an fp32-activations build has none); anything they cannot
// take (other dtypes, K % 8 != 0, misaligned operands) the tiled GEMM. The GEMMs take the epilogue too: the bias,
// the fp32 output, and SwiGLU (silu(gate) * up stored once, no gate|up buffer). Where the GEMV runs, the epilogue
// is fused into it:
//  - kAddNorm: Ops::gemv_residual adds the product into the fp32 residual and leaves the new rows times the next
//    norm's weight in `out` and their partial sums of squares in norm_ss_: `out` is then *lazily normed*, and the
//    next GEMV that reads it applies 1 / rms as it sums (Ops::gemv_norm, gemv_swiglu_norm, gemv_norm_rope), so no
//    norm kernel runs between products (H200 batch 1: 1.12x on the Qwen3-8B shape, 1.03x on 0.6B; bench/RESULTS.md).
//    Anything else that reads a lazily normed tensor gets it normed first (materialize), so a model never sees it.
//    The embedding gather does the same for the first norm (Ops::embed_norm) where the kernel image has it.
//  - kRopeStore on a lazily normed input: RoPE, the q/k norm and the KV store in the product's epilogue
//    (Ops::gemv_norm_rope, sm_90+, where its blocks fit twice in the SMs: 1.07x at 0.6B batch 1, 0.991x at 8B,
//    session 8), else the product then Ops::rope_store. (Folding RoPE into the decode attention instead measured
//    0.94-0.95x, sessions 5 and 8.)
//  - kSwiGLU: one GEMV over gate|up that also applies SiLU·mul (Ops::gemv_swiglu[_norm]).
// So a layer in another format (FP8, int4) loses only its own fusion, not its neighbours'.
//
// Attention kinds (attention_kind): the config's dense geometry (every head rotated, no output gate) takes the fused
// paths above; any other (Qwen3.5's gated attention: partial RoPE, q_proj's per-head [q | gate]) runs unfused, its
// geometry (heads, head_dim, rotary dims) from its handle: the product, the q/gate split (Ops::split_q_gate, into
// gated_qkv_ and gate_), rope_store over the rotary dims, the attention kernel that takes the kind's head_dim, then
// out *= sigmoid(gate) (Ops::sigmoid_mul).
// Gated DeltaNet layers (gdn_weights, gated_delta_net) run GatedDeltaOps over each sequence's state slot: the
// executor stages each sequence's slot with the step (Step::state_slots; -1 for a graph's padding sequences, which
// the kernels keep out of every slot), and a sequence starts from zero states where its first position is 0.
//
// Activations are fp32 (debugging; matches the CPU backend to rounding) or bf16 with fp32 arithmetic inside every
// kernel; the residual stream (Storage::kResidual), the model's output rows (a kOutput tensor's fp32 copy,
// output_rows()) and attention's softmax are fp32 either way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gated_delta_ops.h"
#include "backend/cuda/staged_upload.h"
#include "backend/cuda/tensor_gemm.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "models/model_ops.h"
#include "models/state_layout.h"
#include "tuning.h"

namespace vt {

class CudaModelOps : public ModelOps {
  using CUdeviceptr = cuda::CUdeviceptr;
  using CUstream = cuda::CUstream;

 public:
  struct Params {
    cuda::Act act = cuda::Act::F32;
    int32_t max_tokens = 0;   // rows of one step
    int32_t attn_rows = 0;    // rows up to which decode attention takes the split-K kernel (its partials' rows)
    int32_t max_context = 0;  // keys per sequence at most (sizes the split-K partials)
    int32_t gemv_rows = 8;    // products of up to this many rows take the GEMV (1 .. kNormSsRows)
    // Our tensor-core GEMMs serve the products (bf16 activations, not the cuBLASLt A/B arm): a SwiGLU layer they
    // can take (bf16, no bias, K % 8 == 0) runs as one fused product, so it needs no gate|up scratch.
    bool fused_swiglu = false;
    CudaTuning tuning;
  };
  // Sizing only (the memory plan, before any load): the same declarations, nothing allocated; workspace_bytes()
  // is what an engine's instance allocates.
  CudaModelOps(const ModelConfig &c, const Params &p, int sm_count);
  // An engine's: allocates on ctx's device, launches on `stream`. Weights bound while `upload` is set (set_upload)
  // go up through its stager and give back their checkpoint pages; otherwise by a plain copy.
  // gemm and blas: our tensor-core GEMMs and cuBLASLt, each null when absent.
  CudaModelOps(const ModelConfig &c, const Params &p, cuda::Context &ctx, cuda::Ops &ops, cuda::TensorGemm *gemm,
               cuda::CublasLt *blas, CUstream stream);

  struct Upload {
    cuda::StagedUpload *stager = nullptr;  // null: plain copies on the stream
    const Checkpoint *checkpoint = nullptr;  // whose mapped pages each uploaded matrix gives back (null: none)
    std::function<void(int64_t bytes)> uploaded;  // after each matrix, with the matrix bytes uploaded so far
  };
  void set_upload(const Upload *u) { upload_ = u; }
  // The KV cache: (attention layer, K|V, n_blocks, block_size, n_kv_heads, head_dim) in the activation type, an
  // attention layer's planes at its place among them (layout's LayerState::index).
  // Each attention kind's K/V rows must be the cache's (n_kv_heads, head_dim).
  void set_kv(CUdeviceptr kv, CUdeviceptr layer_bytes, const StateLayout &layout);
  // The state slots: n_state_slots of layout.slot_elems() fp32 each, `stride` floats apart (>= slot_elems(): the
  // CUDA decoder pads a slot so that its growing region maps in small chunks, cuda::slot_layout), a recurrent
  // layer's part of each at its LayerState::slot_offset (the layout set_kv was given).
  void set_state_slots(CUdeviceptr slots, int64_t stride);

  int64_t weight_bytes() const { return weight_bytes_; }
  int64_t workspace_bytes() const { return workspace_bytes_; }  // activations and the ops' scratch
  int32_t gemv_rows_max() const { return p_.gemv_rows; }

  // A step: its shape and where its integers are on the device (the executor's staging).
  struct Step {
    int32_t rows = 0, n_seqs = 0;
    int32_t max_keys = 1;     // of any row (the decode attention's split count follows it, never device values)
    bool multi_row = false;   // some sequence has more than one row (a prefill chunk)
    int32_t n_tiles = 0;      // prefill attention tiles (prefill_tiles_wanted), 0: none
    CUdeviceptr tokens = 0, positions = 0, slots = 0, tiles = 0;
    cuda::DeviceAttentionBatch attn{};
    // (n_seqs) int32: each sequence's state slot, -1 for none (padding, or a model without recurrent layers). A
    // recurrent layer reads a sequence as fresh where attn.seq_pos0 is 0.
    CUdeviceptr state_slots = 0;
    // The executor's lm_head applies the final norm itself (Ops::gemv_norm_head): a fused output kAddNorm leaves
    // the output lazily normed (output_rows().lazy) instead of norming it into the fp32 rows.
    bool fold_output_norm = false;
  };
  void begin_step(const Step &s);
  // Whether a step of `rows` rows, some sequence with more than one, takes the tensor-core prefill attention:
  // then the executor computes its tiles (cuda::Ops::prefill_tiles) and stages them with the step.
  bool prefill_tiles_wanted(int32_t rows, bool multi_row) const;

  Tensor tensor(std::initializer_list<int64_t> parts, Storage storage = Storage::kActivation) override;
  Linear linear_weights(std::initializer_list<const Matrix *> parts,
                        std::initializer_list<const std::vector<float> *> biases = {}) override;
  Vector vector_weights(const std::vector<float> &v) override;
  void embed(Linear table, Tensor out) override;
  void rmsnorm(Tensor x, Vector norm, Tensor out) override;
  void linear(Tensor x, Linear w, Tensor out, const Epilogue &e = {}) override;
  // Any geometry the attention kernels take (head_dim up to 256); the config's dense one takes the fused paths.
  Attention attention_kind(const AttentionGeometry &g) override;
  void attention(Tensor qkv, Attention a, int32_t layer, Tensor out) override;
  // Head geometry GatedDeltaOps takes (conv width up to 4, key heads of up to 128 dims), else ERR_UNSUPPORTED_ARCH.
  Recurrent gdn_weights(const GdnWeights &w) override;
  void gated_delta_net(Tensor in, Recurrent r, Tensor out) override;

  // For the executor's lm_head. A bound matrix (stacked parts: rows q | k | v) in its stored dtype.
  struct DMatrix {
    CUdeviceptr ptr = 0;
    DType dtype = DType::BF16;
    int64_t rows = 0, cols = 0;
    CUdeviceptr bias = 0;  // fp32 (rows), 0: none
  };
  const DMatrix &matrix(Linear w) const { return linears_.at(size_t(w)).m; }
  // y (rows, m.rows) = x (rows, m.cols) · mᵀ (+ bias): the GEMV, our GEMMs, cuBLASLt or the tiled GEMM, as above.
  void product(CUdeviceptr x, int32_t rows, const DMatrix &m, CUdeviceptr y, bool y_f32 = false, bool x_f32 = false);
  // The output tensor's rows after forward(): fp32 in `f32` (the step's rows, cols wide), or, when the step asked
  // fold_output_norm and the output was fused, lazily normed: xw, its sums' partials, the residual and the norm
  // weight, which Ops::gemv_norm_head takes (and fills f32 from).
  struct OutputRows {
    CUdeviceptr f32 = 0;
    int64_t cols = 0;
    bool lazy = false;
    CUdeviceptr xw = 0, norm_ss = 0, residual = 0, norm = 0;
  };
  OutputRows output_rows(Tensor t) const;

 private:
  struct DTensor {
    CUdeviceptr ptr = 0;
    int64_t cols = 0;  // the parts side by side in each row
    Storage storage = Storage::kActivation;
  };
  struct DLinear {
    DMatrix m;
    std::vector<int64_t> part_rows;
    const void *source = nullptr;  // the host data of a one-part layer (a tied lm_head finds the embedding by it)
  };
  CUdeviceptr alloc(size_t bytes);  // a workspace buffer (counted; allocated unless sizing)
  CUdeviceptr upload_weights(const void *const *parts, const size_t *bytes, size_t n, const Matrix *const *release);
  CUdeviceptr upload_floats(const std::vector<float> &v);
  const DTensor &t(Tensor x) const { return tensors_.at(size_t(x)); }
  CUdeviceptr vec(Vector v) const { return v == kNoVector ? 0 : vectors_.at(size_t(v)); }
  // Our tensor-core GEMMs can take a product over this matrix from bf16 rows at x.
  bool gemm_takes(CUdeviceptr x, const DMatrix &m) const {
    return gemm_ && m.dtype == DType::BF16 && cuda::TensorGemm::fits(x, m.ptr, m.cols);
  }
  CUdeviceptr k_cache(int32_t l) const { return kv_ + CUdeviceptr(2 * layout_.kv_index(l)) * kv_layer_bytes_; }
  CUdeviceptr v_cache(int32_t l) const { return kv_ + CUdeviceptr(2 * layout_.kv_index(l) + 1) * kv_layer_bytes_; }
  void flush_embed();         // runs a deferred embed() (one that no rmsnorm took into its gather)
  void materialize(Tensor x);  // x normed for real, if it is lazily normed
  // Before an op changes a residual or norm_ss_ (a kAddNorm, the embedding): the lazily normed tensor, unless it is
  // the op's own output, is normed for real while its residual still holds the rows it stands for.
  void settle_lazy(Tensor out);
  bool skips(CudaSkip k) const { return (p_.tuning.skip & k) != 0; }

  // An attention kind: its geometry, whether it is the config's dense one (the fused paths), its RoPE table.
  struct AttnKind {
    AttentionGeometry g;
    bool dense = false;
    CUdeviceptr inv_freq = 0;  // (g.rotary_dims / 2) fp32
    float rope_scale = 1.f;
  };
  enum class Attn { kDecode, kPrefill, kSimple };
  Attn attention_form(const AttentionGeometry &g) const;  // which kernel a kind's attention takes this step
  // kRopeStore of a kind that is not the dense one: y (T, q[|gate] | k | v) in place → q (gated: in gated_qkv_,
  // with the gates in gate_) normed and roped over the rotary dims, k normed, roped and stored, v stored.
  void rope_store_unfused(const AttnKind &k, CUdeviceptr y, int64_t y_cols, const Epilogue &e);
  // The split-K decode attention's partials and tickets for heads of this geometry: grown where it needs more
  // than allocated (the sizing instance grows alike, so the plan stays the allocation).
  void reserve_attention(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim);
  // A recurrent layer's weights on the device (GdnWeights' fp32 vectors, uploaded) and geometry.
  struct DGdn {
    GdnGeometry geo{};
    int32_t conv_kernel = 0, layer = 0;
    CUdeviceptr conv = 0, a_log = 0, dt_bias = 0, norm = 0;
  };

  const ModelConfig &c_;
  Params p_;
  int sm_count_ = 0;
  bool sizing_ = false;
  cuda::Context *ctx_ = nullptr;
  cuda::Ops *ops_ = nullptr;
  cuda::TensorGemm *gemm_ = nullptr;
  cuda::CublasLt *blas_ = nullptr;
  CUstream stream_ = nullptr;
  const Upload *upload_ = nullptr;
  size_t as_ = 4, ps_ = 4;  // bytes of an activation, of a kAddNorm product (fp32 with VT_CUDA_SUBLAYER_F32=1)
  bool rope_fused_ = false;  // the dense kind's kRopeStore may take Ops::gemv_norm_rope (the image, the SMs allow it)
  std::vector<AttnKind> kinds_;

  std::vector<cuda::DeviceBuffer> buffers_;  // weights and workspaces, owned here
  int64_t weight_bytes_ = 0, workspace_bytes_ = 0;
  std::vector<DTensor> tensors_;
  std::vector<DLinear> linears_;
  std::vector<CUdeviceptr> vectors_;
  CUdeviceptr kv_ = 0, kv_layer_bytes_ = 0;
  StateLayout layout_;
  CUdeviceptr state_slots_ = 0;
  int64_t slot_stride_ = 0;  // floats

  // Scratch, sized by the declarations: a kAddNorm's product before it is added (as wide as the widest residual),
  // the fused norm's partial sums of squares (kNormSsRows rows of Ops::norm_parts of that width), gate|up before
  // SiLU·mul where the fused GEMV does not run (the widest two-part layer), the output's fp32 rows (a kOutput
  // tensor's, bf16 activations; with fp32 ones the tensor itself), the split-K attention partials.
  static constexpr int64_t kNormSsRows = 8;  // gemv_rows_max()'s largest
  CUdeviceptr proj_ = 0, norm_ss_ = 0, gate_up_ = 0, final_ = 0, attn_ws_ = 0, attn_tickets_ = 0;
  int64_t proj_cols_ = 0, gate_up_cols_ = 0;
  size_t attn_ws_bytes_ = 0, attn_tickets_bytes_ = 0;  // split-K attention: partials; tickets for attn_rows rows
  Tensor output_{-1};
  // Gated attention kinds (the widest): q | k | v with q's heads side by side, as rope_store and attention read them,
  // and the gates, (max_tokens, ·) in the activation type.
  CUdeviceptr gated_qkv_ = 0, gate_ = 0;
  int64_t gated_qkv_cols_ = 0, gate_cols_ = 0;
  // Recurrent layers: their ops (resolved at the first such layer), weights, and the scratch of the widest: the
  // conv's output (max_tokens, C) in the activation type, the gates beta and g (max_tokens, Hv) fp32.
  std::unique_ptr<cuda::GatedDeltaOps> gdn_ops_;
  std::vector<DGdn> gdns_;
  CUdeviceptr conv_out_ = 0, beta_ = 0, g_ = 0;
  int64_t conv_cols_ = 0, gate_heads_ = 0;

  // The step
  Step s_{};
  bool fused_ = false;  // this step's rows take the fused norm (the kernel image has it; few enough rows)
  bool embed_deferred_ = false;  // embed() waits to be taken into the first rmsnorm's gather
  Linear embed_table_{};
  Tensor embed_out_{};
  // The lazily normed tensor (at most one: norm_ss_ holds its partials), with the residual and norm it stands for.
  Tensor lazy_{-1}, lazy_residual_{-1};
  Vector lazy_norm_ = kNoVector;
};

}  // namespace vt
