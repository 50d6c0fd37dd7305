// The dense decoder shared by Llama, Qwen2 and Qwen3 (pre-norm, RMSNorm, GQA attention with RoPE, SwiGLU MLP),
// written once over ModelOps (models/model_ops.h). What differs between them is data, not code: Qwen2 has q/k/v
// biases, Qwen3 normalises each head of q and k before RoPE, and each picks its own rope scaling (the backend
// reads that from the config). Its weight schema is bind(); its forward pass reads top to bottom.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/config.h"
#include "loader/weights.h"
#include "models/model_ops.h"

namespace vt {

class DenseModel {
 public:
  // Declares the model's activations and binds its weights (which stay `w`'s: the backend may copy or map them).
  DenseModel(const ModelConfig &c, const Weights &w, ModelOps &ops);

  // The weight schema's shapes for a config, no data: what a backend's sizing needs (memory_plan.cpp) before a
  // checkpoint is read.
  static Weights weight_shapes(const ModelConfig &c);

  // One step over the rows begin_step gave `ops`; afterwards output() holds each row's final-normed hidden state.
  void forward(ModelOps &ops) const;
  Tensor output() const { return h_; }

 private:
  struct Layer {
    Linear qkv, o, gate_up, down;
    Vector attn_norm, q_norm, k_norm, mlp_norm;
  };
  const ModelConfig &c_;
  const Weights &w_;
  std::vector<Layer> layers_;
  Vector final_norm_{};
  Tensor x_{}, h_{}, qkv_{}, attn_{}, act_{};
};

}  // namespace vt
