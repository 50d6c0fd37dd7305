// The hybrid decoder of Qwen3.5 / Qwen3.6 (transformers' qwen3_5: Qwen3_5ForCausalLM, and the language model of
// Qwen3_5ForConditionalGeneration), written once over ModelOps (models/model_ops.h) like the dense one. Its layers
// mix tokens two ways, as config.json's layer_types says (the real models: three Gated DeltaNet layers, then one
// of gated attention, repeating):
//   - linear_attention: a Gated DeltaNet, in_proj (q|k|v, z, b, a as one linear) → ModelOps::gated_delta_net (conv,
//     gates, the delta rule over the sequence's state slot, the gated norm) → out_proj;
//   - full_attention: gated attention, q_proj giving per head [q | gate], q and k normed per head, RoPE over the
//     leading rotary_dims of each head, attention scaled 1/sqrt(head_dim), times sigmoid(gate), o_proj;
// each followed by the SwiGLU MLP, pre-norm. Its RMSNorms are zero-centred (the stored weight w scales by 1 + w),
// except the DeltaNet's gated norm (w as is): the model binds 1 + w, computed in fp32 as transformers does.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "loader/config.h"
#include "loader/weights.h"
#include "models/model.h"
#include "models/state_layout.h"
#include "models/weight_schema.h"

namespace vt {

// The weight schema: the language model under "model." (a CausalLM) or "model.language_model." (the
// ConditionalGeneration), the vision tower ("model.visual.") and the MTP head ("mtp.") skipped knowingly.
WeightSchema qwen3_5_schema(const ModelConfig &c);
// K/V for the attention layers, a state slot part (conv state, recurrent state) for each DeltaNet layer.
StateLayout qwen3_5_state(const ModelConfig &c);

class Qwen3_5Model : public Model {
 public:
  Qwen3_5Model(const ModelConfig &c, const Weights &w, ModelOps &ops);

  void forward(ModelOps &ops) const override;
  Tensor output() const override { return h_; }
  Linear head() const override { return head_; }

 private:
  struct Layer {
    bool attention;  // else a Gated DeltaNet
    Linear in, out;  // attention: q|gate, k, v and o; DeltaNet: in_proj (qkv, z, b, a) and out_proj
    Recurrent gdn{};
    Linear gate_up, down;
    Vector attn_norm, q_norm, k_norm, mlp_norm;
  };
  // 1 + w of a zero-centred norm's weight, kept here for the ops to bind (a deque: the references stay put).
  Vector shifted(ModelOps &ops, const std::vector<float> &w);

  std::vector<Layer> layers_;
  std::deque<std::vector<float>> shifted_;
  Attention attn_kind_{};
  Linear embed_{}, head_{};
  Vector final_norm_{};
  Tensor x_{}, h_{}, qkv_{}, attn_{}, gdn_in_{}, gdn_out_{}, act_{};
};

}  // namespace vt
