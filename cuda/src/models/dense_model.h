// The dense decoder shared by Llama, Qwen2 and Qwen3 (pre-norm, RMSNorm, GQA attention with RoPE, SwiGLU MLP),
// written once over ModelOps (models/model_ops.h). What differs between them is data, not code: Qwen2 has q/k/v
// biases, Qwen3 normalises each head of q and k before RoPE, and each picks its own rope scaling (the backend
// reads that from the config). Its weight schema is bind(); its forward pass reads top to bottom.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/config.h"
#include "loader/weights.h"
#include "models/model.h"

namespace vt {

class DenseModel : public Model {
 public:
  // Declares the model's activations and binds its weights (which stay `w`'s: the backend may copy or map them).
  DenseModel(const ModelConfig &c, const Weights &w, ModelOps &ops);

  // The weight schema's shapes for a config, no data: what a backend's sizing needs (memory_plan.cpp) before a
  // checkpoint is read.
  static Weights weight_shapes(const ModelConfig &c);

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
};

}  // namespace vt
