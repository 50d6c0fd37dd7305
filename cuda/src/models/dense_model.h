// The dense decoder shared by Llama, Qwen2 and Qwen3 (pre-norm, RMSNorm, GQA attention with RoPE, SwiGLU MLP),
// written once over ModelOps (models/model_ops.h). What differs between them is data, not code: Qwen2 has q/k/v
// biases, Qwen3 normalises each head of q and k before RoPE, and each picks its own rope scaling (the backend
// reads that from the config). Its weight schema is dense_schema(); its forward pass reads top to bottom.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/config.h"
#include "loader/weights.h"
#include "models/model.h"
#include "models/weight_schema.h"

namespace vt {

// The dense models' tensors for a config, as transformers names them (model.embed_tokens, model.layers.<l>.*,
// model.norm, lm_head): biases exactly where the config says (qkv_bias, o_bias, mlp_bias), q_norm/k_norm where
// qk_norm, the lm_head tied when tie_word_embeddings.
WeightSchema dense_schema(const ModelConfig &c);

class DenseModel : public Model {
 public:
  // Declares the model's activations and binds its weights (which stay `w`'s: the backend may copy or map them).
  DenseModel(const ModelConfig &c, const Weights &w, ModelOps &ops);

  void forward(ModelOps &ops) const override;
  Tensor output() const override { return h_; }
  Linear head() const override { return head_; }

 private:
  struct Layer {
    Linear qkv, o, gate_up, down;
    Vector attn_norm, q_norm, k_norm, mlp_norm;
  };
  std::vector<Layer> layers_;
  Linear embed_{}, head_{};
  Vector final_norm_{};
  Tensor x_{}, h_{}, qkv_{}, attn_{}, act_{};
  Attention attn_kind_{};
};

}  // namespace vt
