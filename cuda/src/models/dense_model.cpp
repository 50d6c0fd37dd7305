#include "models/dense_model.h"

namespace vt {

WeightSchema dense_schema(const ModelConfig &c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim;
  const char *attn_why =
      c.family == Family::Qwen2 ? "a Qwen2ForCausalLM has q/k/v biases" : "config.json's attention_bias is true";
  const char *mlp_why = "config.json's mlp_bias is true";
  // In the order bind_weights reads them (the first tensor wrong is the one a refusal names).
  SchemaBuilder b("model.");
  b.body().matrix(Role::kEmbed, "embed_tokens.weight", V, H);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    b.layer(l)
        .vector(Role::kAttnNorm, "input_layernorm.weight", H)
        .matrix(Role::kQ, "self_attn.q_proj.weight", QD, H)
        .matrix(Role::kK, "self_attn.k_proj.weight", KVD, H)
        .matrix(Role::kV, "self_attn.v_proj.weight", KVD, H)
        .matrix(Role::kO, "self_attn.o_proj.weight", H, QD)
        .optional(c.qkv_bias, Role::kQBias, "self_attn.q_proj.bias", QD, attn_why)
        .optional(c.qkv_bias, Role::kKBias, "self_attn.k_proj.bias", KVD, attn_why)
        .optional(c.qkv_bias, Role::kVBias, "self_attn.v_proj.bias", KVD, attn_why)
        .optional(c.o_bias, Role::kOBias, "self_attn.o_proj.bias", H, attn_why)
        .optional(c.qk_norm, Role::kQNorm, "self_attn.q_norm.weight", c.head_dim)
        .optional(c.qk_norm, Role::kKNorm, "self_attn.k_norm.weight", c.head_dim)
        .vector(Role::kMlpNorm, "post_attention_layernorm.weight", H)
        .matrix(Role::kGate, "mlp.gate_proj.weight", I, H)
        .matrix(Role::kUp, "mlp.up_proj.weight", I, H)
        .matrix(Role::kDown, "mlp.down_proj.weight", H, I)
        .optional(c.mlp_bias, Role::kGateBias, "mlp.gate_proj.bias", I, mlp_why)
        .optional(c.mlp_bias, Role::kUpBias, "mlp.up_proj.bias", I, mlp_why)
        .optional(c.mlp_bias, Role::kDownBias, "mlp.down_proj.bias", H, mlp_why);
  }
  b.body().vector(Role::kFinalNorm, "norm.weight", H);
  b.top().matrix(Role::kLmHead, "lm_head.weight", V, H);
  b.schema.tied_lm_head = c.tie_word_embeddings;
  return std::move(b.schema);
}

DenseModel::DenseModel(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  const int64_t H = c.hidden_size, QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim;
  x_ = ops.tensor({H}, Storage::kResidual);
  h_ = ops.tensor({H}, Storage::kOutput);  // the normed input of the current sub-block (at the end: the final norm's)
  qkv_ = ops.tensor({QD, KVD, KVD});
  attn_ = ops.tensor({QD});
  attn_kind_ = ops.attention_kind({c.n_heads, c.n_kv_heads, c.head_dim, c.head_dim, false});
  act_ = ops.tensor({c.intermediate_size});
  embed_ = ops.linear_weights({&w.matrix(Role::kEmbed)});
  for (int32_t l = 0; l < w.n_layers(); ++l) {
    const auto m = [&](Role r) { return &w.matrix(r, l); };
    const auto v = [&](Role r) { return &w.vec(r, l); };
    layers_.push_back({ops.linear_weights({m(Role::kQ), m(Role::kK), m(Role::kV)},
                                          {v(Role::kQBias), v(Role::kKBias), v(Role::kVBias)}),
                       ops.linear_weights({m(Role::kO)}, {v(Role::kOBias)}),
                       ops.linear_weights({m(Role::kGate), m(Role::kUp)}, {v(Role::kGateBias), v(Role::kUpBias)}),
                       ops.linear_weights({m(Role::kDown)}, {v(Role::kDownBias)}),
                       ops.vector_weights(*v(Role::kAttnNorm)), ops.vector_weights(*v(Role::kQNorm)),
                       ops.vector_weights(*v(Role::kKNorm)), ops.vector_weights(*v(Role::kMlpNorm))});
  }
  final_norm_ = ops.vector_weights(w.vec(Role::kFinalNorm));
  head_ = ops.linear_weights({&w.matrix(Role::kLmHead)});  // (tied: the embedding's view, so its handle)
}

void DenseModel::forward(ModelOps &ops) const {
  ops.embed(embed_, x_);
  ops.rmsnorm(x_, layers_[0].attn_norm, h_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer &L = layers_[l];
    const bool last = l + 1 == layers_.size();
    // attention: q|k|v (Qwen3: each head of q and k normed), RoPE, the new keys and values into the cache
    ops.linear(h_, L.qkv, qkv_, Epilogue::rope_store(int32_t(l), attn_kind_, L.q_norm, L.k_norm));
    ops.attention(qkv_, attn_kind_, int32_t(l), attn_);
    // residual += o(attention); h = post_attention_layernorm(residual)
    ops.linear(attn_, L.o, h_, Epilogue::add_norm(x_, L.mlp_norm));
    // MLP: silu(gate) * up, then down; residual += it; h = the next layer's input_layernorm (or the final norm:
    // the model's output)
    ops.linear(h_, L.gate_up, act_, Epilogue::swiglu());
    ops.linear(act_, L.down, h_, Epilogue::add_norm(x_, last ? final_norm_ : layers_[l + 1].attn_norm, last));
  }
}

}  // namespace vt
