// A model's weight schema (issue 31): every tensor it reads, by role (what the tensor is to the model) and layer,
// with the name and shape a checkpoint must hold it under. One schema per architecture, written once in its model
// file (models/dense_model.cpp: dense_schema) and named by its registry row; binding (loader/weights.h:
// bind_weights) and sizing (shape_weights, the memory plan, the backends' sizing ops) both read it, so a name or a
// shape is never written twice, and the model's constructor asks its Weights for roles, never for names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vt {

// What a tensor is to a model, whatever the checkpoint calls it. An MoE model will add its expert roles; a role is
// an index into Weights' per-layer tables, so kCount stays last.
enum class Role : uint8_t {
  kEmbed, kLmHead, kFinalNorm,                          // global
  kAttnNorm, kMlpNorm,                                  // each layer's RMSNorms
  kQ, kK, kV, kO, kQBias, kKBias, kVBias, kOBias,       // attention
  kQNorm, kKNorm,                                       // per-head q/k RMSNorm (Qwen3)
  kGate, kUp, kDown, kGateBias, kUpBias, kDownBias,     // SwiGLU MLP
  // Gated DeltaNet (Qwen3.5 / 3.6's linear attention): its projections, conv, gate parameters and gated norm
  kInProjQkv, kInProjZ, kInProjB, kInProjA, kConv1d, kALog, kDtBias, kGdnNorm, kOutProj,
  kCount
};
constexpr int kRoleCount = int(Role::kCount);
const char *role_name(Role r);  // "q_bias": for messages

struct TensorSpec {
  enum Kind : uint8_t {
    kMatrix,  // (rows, cols), HF Linear layout; bound as a view into the checkpoint's mapping
    kVector,  // (n), or any small tensor (a conv weight (C, 1, W)); bound as an fp32 copy of every element (norms,
              // biases: small, and the hot loops stay simple)
  };
  Role role;
  int32_t layer = -1;  // -1: global
  std::string name;    // the full name in the checkpoint
  std::vector<int64_t> shape;
  Kind kind = kMatrix;
  // For an optional tensor the config says is there (a bias): the reason it must be, which the missing-tensor
  // message gives ("a Qwen2ForCausalLM has q/k/v biases"). Null: the message names the tensor only.
  const char *why = nullptr;
  // An optional tensor the config says the model lacks (a bias with attention_bias false): declared, so the model
  // may ask for it and gets an empty one, never read from the checkpoint (one there is reported unused). (Not in
  // the brief's struct: without it Weights could not tell "absent by config" from "never declared".)
  bool absent = false;
};

struct WeightSchema {
  std::vector<TensorSpec> tensors;  // in binding order: layer by layer, each layer's tensors together
  // The lm_head spec (Role::kLmHead) is the embedding: bound to it, and a copy the checkpoint stores anyway must
  // be identical to it.
  bool tied_lm_head = false;
  // Tensors under these prefixes are knowingly not read (a vision tower, an MTP head): never bound, never
  // "unused", counted apart (Weights::skipped_*). Empty for the dense models.
  std::vector<std::string> skipped_prefixes;
  // Where the layers' tensors are named ("model.layers."; each layer's under "<layers_prefix><l>."): a leftover
  // tensor under it is reported as a layer the config does not have. (Not in the brief's struct either: it keeps
  // the binder's messages free of any one checkpoint layout.)
  std::string layers_prefix;

  int32_t n_layers() const;  // 1 + the highest layer any spec names
};

// Writes a schema spec by spec: names are completed from where the builder stands (body(), layer(l), top()).
//   SchemaBuilder b("model.");
//   b.body().matrix(Role::kEmbed, "embed_tokens.weight", V, H);        // model.embed_tokens.weight
//   b.layer(0).vector(Role::kAttnNorm, "input_layernorm.weight", H);   // model.layers.0.input_layernorm.weight
//   b.top().matrix(Role::kLmHead, "lm_head.weight", V, H);             // lm_head.weight
class SchemaBuilder {
 public:
  // body_prefix: where the language model's tensors sit ("model."; a multimodal checkpoint nests them deeper,
  // "model.language_model."). Its layers are body_prefix + "layers.<l>.".
  explicit SchemaBuilder(std::string body_prefix);

  SchemaBuilder &body();            // global tensors under the body prefix (the embedding, the final norm)
  SchemaBuilder &layer(int32_t l);  // layer l's
  SchemaBuilder &top();             // global tensors named from the top (lm_head.weight)

  SchemaBuilder &matrix(Role role, const std::string &name, int64_t rows, int64_t cols);
  SchemaBuilder &vector(Role role, const std::string &name, int64_t n);
  // A small tensor of any shape, bound as an fp32 copy of its elements (in order): a conv weight (C, 1, W).
  SchemaBuilder &values(Role role, const std::string &name, std::vector<int64_t> shape);
  // A vector the config may or may not give the model (a bias, q_norm): listed when `present`, declared absent
  // otherwise; `why` as TensorSpec::why.
  SchemaBuilder &optional(bool present, Role role, const std::string &name, int64_t n, const char *why = nullptr);

  WeightSchema schema;

 private:
  SchemaBuilder &add(TensorSpec s);
  std::string body_prefix_, prefix_;
  int32_t layer_ = -1;
};

}  // namespace vt
