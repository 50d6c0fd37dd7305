// What a model asks of a backend (issue 21): the ops a decoder is made of, over tensors and weights the backend
// holds. A model (models/dense_model.cpp) is written once against this interface, as a weight schema (which
// matrices make each linear layer, bound once at load) and a composition of ops; a backend implements the ops
// and decides how to run each: the CPU backend (backend/cpu/cpu_model_ops) one kernel after another, the CUDA
// backend (next) a linear and its epilogue as one fused kernel where the weight format and the row count allow.
//
// A step: the decoder hands its backend's ops the step (each backend its own way: the CPU one the batch, the CUDA
// one where the step's integers sit on the device), then the model (models/model.h) runs its ops over the step's
// T rows; the tensors it names are (T, cols) activations whose layout is the backend's.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "loader/weights.h"
#include "models/gdn_geometry.h"
#include "models/decoder.h"

namespace vt {

// An activation tensor of the step: declared once at load (ModelOps::tensor), rows = the step's tokens.
enum class Tensor : int32_t {};
// What a tensor holds, which decides its storage.
enum class Storage : uint8_t {
  kActivation,  // in the backend's activation type
  kResidual,    // fp32 on every backend: the residual stream
  kOutput,      // an activation that an output kAddNorm also writes (the model's final-normed rows, which the
                // lm_head reads): a backend may keep those rows in fp32 besides
};
// A linear layer's weights as the backend holds them (ModelOps::linear_weights): one or more matrices over the
// same input whose outputs sit side by side (q|k|v, gate|up), each with its bias or none. An embedding table and
// the lm_head are one-matrix Linears too (a tied lm_head is the embedding's handle).
enum class Linear : int32_t {};
// A vector of weights (a norm's), bound at load like the matrices (ModelOps::vector_weights): a step may be
// captured and replayed (CUDA graphs), so nothing it reads may be bound during it. kNoVector: none.
enum class Vector : int32_t {};
constexpr Vector kNoVector = Vector(-1);

// One kind of attention layer (ModelOps::attention_kind), its geometry carried by the handle the model binds its
// layers' ops with (the kRopeStore epilogue, attention), never read from the config inside the ops: so a model
// may hold two kinds (or, later, a vision tower beside its language model).
struct AttentionGeometry {
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  // RoPE turns the leading rotary_dims of each q/k head (NeoX halves) and leaves the rest: head_dim for the dense
  // models, Qwen3.5's 64 of 256. Its frequencies and scaling are the config's rope parameters over these dims.
  int32_t rotary_dims = 0;
  // Qwen3.5's gated attention: q_proj's output is, per head, [q (head_dim) | gate (head_dim)], and attention's
  // output is multiplied by sigmoid(gate) before o_proj.
  bool output_gate = false;
  bool operator==(const AttentionGeometry &) const = default;
};
enum class Attention : int32_t {};

// What a linear layer's output goes through before it lands in `out`. The model says what it wants; the backend
// may fuse it into the product.
struct Epilogue {
  enum Kind {
    kNone,       // out = y
    kAddNorm,    // residual += y; out = rmsnorm(residual) * norm: the next sub-block's input, or (output) the
                 // model's output (Model::output: the lm_head's input; out is then declared Storage::kOutput)
    kRopeStore,  // y = q|k|v of `layer`, an attention of kind `attention`: q and k normed per head (q_norm,
                 // k_norm, unless kNoVector), RoPE at the rows' positions, k and v written into the layer's KV
                 // cache; out = y (its q, and gate, are the kind's attention's input)
    kSwiGLU,     // y = gate|up: out = silu(gate) * up
  };
  Kind kind = kNone;
  Tensor residual{};          // kAddNorm
  Vector norm = kNoVector;    // kAddNorm
  bool output = false;        // kAddNorm
  int32_t layer = 0;          // kRopeStore
  Attention attention{};      // kRopeStore
  Vector q_norm = kNoVector, k_norm = kNoVector;  // kRopeStore

  static Epilogue add_norm(Tensor residual, Vector norm, bool output = false) {
    Epilogue e;
    e.kind = kAddNorm, e.residual = residual, e.norm = norm, e.output = output;
    return e;
  }
  static Epilogue rope_store(int32_t layer, Attention attention, Vector q_norm, Vector k_norm) {
    Epilogue e;
    e.kind = kRopeStore, e.layer = layer, e.attention = attention, e.q_norm = q_norm, e.k_norm = k_norm;
    return e;
  }
  static Epilogue swiglu() {
    Epilogue e;
    e.kind = kSwiGLU;
    return e;
  }
};

// A Gated DeltaNet layer's own weights and geometry (ModelOps::gdn_weights): the conv, the gates and the norm that
// the op applies between the layer's in_proj and out_proj (both ordinary Linears of the model); fp32 host copies.
struct GdnWeights {
  GdnGeometry geo{};
  int32_t conv_kernel = 0;
  const std::vector<float> *conv = nullptr;                       // (C, W), C = geo.qkv_dim(): conv1d.weight (C, 1, W)
  const std::vector<float> *a_log = nullptr, *dt_bias = nullptr;  // (Hv)
  const std::vector<float> *norm = nullptr;                       // (Dv): the gated RMSNorm's weight, applied as is
  int32_t layer = 0;  // the model layer: its part of each state slot (models/state_layout.h)
};
enum class Recurrent : int32_t {};

class ModelOps {
 public:
  virtual ~ModelOps() = default;

  // Load time. A (max_tokens, cols) activation tensor: `parts` are the widths of the side-by-side outputs of the
  // linear layer that writes it (q|k|v: {q, k, v}), one part for any other tensor.
  virtual Tensor tensor(std::initializer_list<int64_t> parts, Storage storage = Storage::kActivation) = 0;
  // A linear layer: the matrices (each (rows, cols) over the same cols) and their biases (null or empty: none).
  // Binding a one-matrix layer whose matrix is already bound alone gives the same handle (a tied lm_head).
  virtual Linear linear_weights(std::initializer_list<const Matrix *> parts,
                                std::initializer_list<const std::vector<float> *> biases = {}) = 0;
  // A vector of weights (empty: kNoVector).
  virtual Vector vector_weights(const std::vector<float> &v) = 0;
  // A kind of attention layer; a backend refuses (ERR_UNSUPPORTED_ARCH) a geometry it cannot run.
  virtual Attention attention_kind(const AttentionGeometry &g) = 0;

  // Step time, over the rows of the step the decoder gave its ops.
  virtual void embed(Linear table, Tensor out) = 0;             // out = the table's rows of the step's tokens
  virtual void rmsnorm(Tensor x, Vector norm, Tensor out) = 0;  // out = rmsnorm(x) * norm
  virtual void linear(Tensor x, Linear w, Tensor out, const Epilogue &e = {}) = 0;
  // Paged causal attention of `layer` (of kind `a`) for the q part of qkv (written by a kRopeStore linear of the same
  // layer and kind, the step's last) → out (n_heads · head_dim; gated by the kind's output gate).
  virtual void attention(Tensor qkv, Attention a, int32_t layer, Tensor out) = 0;
  // Load time: a Gated DeltaNet layer's weights (the handle the op below takes).
  virtual Recurrent gdn_weights(const GdnWeights &w) = 0;
  // The Gated DeltaNet between its projections: in = in_proj's output, parts {qkv (C), z (Hv·Dv), b (Hv), a (Hv)};
  // out (Hv·Dv) = gated_rmsnorm(delta_rule(silu(conv(qkv)), gates(b, a)), z): out_proj's input. Each sequence's
  // conv and recurrent states are in its state slot (ForwardBatch::state_slots), read as zeros when its chunk
  // starts at position 0 (a new or recomputed sequence: whatever the slot held is overwritten).
  virtual void gated_delta_net(Tensor in, Recurrent r, Tensor out) = 0;
  // (The lm_head is the decoder's: it runs Model::head over Model::output's rows, where the logits are wanted.)
};

}  // namespace vt
