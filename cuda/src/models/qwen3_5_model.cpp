#include "models/qwen3_5_model.h"

#include "models/registry.h"
#include "status.h"

namespace vt {

namespace {

GdnGeometry gdn_geometry(const ModelConfig &c) {
  return {c.gdn.n_k_heads, c.gdn.n_v_heads, c.gdn.k_dim, c.gdn.v_dim};
}

bool is_attention(const ModelConfig &c, int32_t l) { return c.layer_kinds[size_t(l)] == LayerKind::Attention; }

}  // namespace

WeightSchema qwen3_5_schema(const ModelConfig &c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t QD = int64_t(c.n_heads) * D, KVD = int64_t(c.n_kv_heads) * D;
  const GdnGeometry g = gdn_geometry(c);
  const int64_t C = g.qkv_dim(), VD = int64_t(g.n_v_heads) * g.v_dim;
  // transformers nests the language model one level deeper in the ConditionalGeneration (its checkpoint names):
  // the registry row that builds a vision tower beside it.
  const bool nested = model_entry(c).vision_tower;
  SchemaBuilder b(nested ? "model.language_model." : "model.");
  b.body().matrix(Role::kEmbed, "embed_tokens.weight", V, H);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    b.layer(l).vector(Role::kAttnNorm, "input_layernorm.weight", H);
    if (is_attention(c, l)) {
      b.matrix(Role::kQ, "self_attn.q_proj.weight", 2 * QD, H)  // per head [q | gate]
          .matrix(Role::kK, "self_attn.k_proj.weight", KVD, H)
          .matrix(Role::kV, "self_attn.v_proj.weight", KVD, H)
          .matrix(Role::kO, "self_attn.o_proj.weight", H, QD)
          .vector(Role::kQNorm, "self_attn.q_norm.weight", D)
          .vector(Role::kKNorm, "self_attn.k_norm.weight", D);
    } else {
      b.matrix(Role::kInProjQkv, "linear_attn.in_proj_qkv.weight", C, H)
          .matrix(Role::kInProjZ, "linear_attn.in_proj_z.weight", VD, H)
          .matrix(Role::kInProjB, "linear_attn.in_proj_b.weight", g.n_v_heads, H)
          .matrix(Role::kInProjA, "linear_attn.in_proj_a.weight", g.n_v_heads, H)
          .values(Role::kConv1d, "linear_attn.conv1d.weight", {C, 1, c.gdn.conv_kernel})
          .vector(Role::kALog, "linear_attn.A_log", g.n_v_heads)
          .vector(Role::kDtBias, "linear_attn.dt_bias", g.n_v_heads)
          .vector(Role::kGdnNorm, "linear_attn.norm.weight", g.v_dim)
          .matrix(Role::kOutProj, "linear_attn.out_proj.weight", H, VD);
    }
    b.vector(Role::kMlpNorm, "post_attention_layernorm.weight", H)
        .matrix(Role::kGate, "mlp.gate_proj.weight", I, H)
        .matrix(Role::kUp, "mlp.up_proj.weight", I, H)
        .matrix(Role::kDown, "mlp.down_proj.weight", H, I);
  }
  b.body().vector(Role::kFinalNorm, "norm.weight", H);
  b.top().matrix(Role::kLmHead, "lm_head.weight", V, H);
  b.schema.tied_lm_head = c.tie_word_embeddings;
  // Read by neither this model nor transformers' text model: listed in modelInfo, never mapped resident.
  if (c.vision_tower) b.schema.skipped_prefixes.push_back("model.visual.");
  if (c.mtp_layers > 0) b.schema.skipped_prefixes.push_back("mtp.");
  return std::move(b.schema);
}

StateLayout qwen3_5_state(const ModelConfig &c) {
  StateLayout s(c.n_kv_heads, c.head_dim);
  const int64_t slot = gdn_geometry(c).slot_floats(c.gdn.conv_kernel);
  for (int32_t l = 0; l < c.n_layers; ++l) is_attention(c, l) ? s.add_attention() : s.add_slot(slot);
  return s;
}

Vector Qwen3_5Model::shifted(ModelOps &ops, const std::vector<float> &w) {
  std::vector<float> &v = shifted_.emplace_back(w);
  for (float &x : v) x = 1.f + x;
  return ops.vector_weights(v);
}

Qwen3_5Model::Qwen3_5Model(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  const int64_t H = c.hidden_size, QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim;
  const GdnGeometry g = gdn_geometry(c);
  const int64_t VD = int64_t(g.n_v_heads) * g.v_dim;
  x_ = ops.tensor({H}, Storage::kResidual);
  h_ = ops.tensor({H}, Storage::kOutput);  // the normed input of the current sub-block (at the end: the final norm's)
  act_ = ops.tensor({c.intermediate_size});
  bool any_attention = false, any_gdn = false;
  for (int32_t l = 0; l < c.n_layers; ++l) (is_attention(c, l) ? any_attention : any_gdn) = true;
  if (any_attention) {
    qkv_ = ops.tensor({2 * QD, KVD, KVD});
    attn_ = ops.tensor({QD});
    attn_kind_ = ops.attention_kind({c.n_heads, c.n_kv_heads, c.head_dim, c.rotary_dims, true});
  }
  if (any_gdn) {
    gdn_in_ = ops.tensor({g.qkv_dim(), VD, g.n_v_heads, g.n_v_heads});
    gdn_out_ = ops.tensor({VD});
  }
  embed_ = ops.linear_weights({&w.matrix(Role::kEmbed)});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const auto m = [&](Role r) { return &w.matrix(r, l); };
    const auto v = [&](Role r) -> const std::vector<float> & { return w.vec(r, l); };
    Layer L{};
    L.attention = is_attention(c, l);
    if (L.attention) {
      L.in = ops.linear_weights({m(Role::kQ), m(Role::kK), m(Role::kV)});
      L.out = ops.linear_weights({m(Role::kO)});
      L.q_norm = shifted(ops, v(Role::kQNorm)), L.k_norm = shifted(ops, v(Role::kKNorm));
    } else {
      L.in = ops.linear_weights({m(Role::kInProjQkv), m(Role::kInProjZ), m(Role::kInProjB), m(Role::kInProjA)});
      L.out = ops.linear_weights({m(Role::kOutProj)});
      GdnWeights gw;
      gw.geo = g, gw.conv_kernel = c.gdn.conv_kernel, gw.layer = l;
      gw.conv = &v(Role::kConv1d), gw.a_log = &v(Role::kALog), gw.dt_bias = &v(Role::kDtBias);
      gw.norm = &v(Role::kGdnNorm);
      L.gdn = ops.gdn_weights(gw);
      L.q_norm = L.k_norm = kNoVector;
    }
    L.gate_up = ops.linear_weights({m(Role::kGate), m(Role::kUp)});
    L.down = ops.linear_weights({m(Role::kDown)});
    L.attn_norm = shifted(ops, v(Role::kAttnNorm)), L.mlp_norm = shifted(ops, v(Role::kMlpNorm));
    layers_.push_back(L);
  }
  final_norm_ = shifted(ops, w.vec(Role::kFinalNorm));
  head_ = ops.linear_weights({&w.matrix(Role::kLmHead)});  // (tied: the embedding's handle)
}

void Qwen3_5Model::forward(ModelOps &ops) const {
  ops.embed(embed_, x_);
  ops.rmsnorm(x_, layers_[0].attn_norm, h_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer &L = layers_[l];
    const bool last = l + 1 == layers_.size();
    if (L.attention) {
      // q|gate, k, v; q and k normed per head, partial RoPE, K/V into the cache; attention gated by sigmoid(gate)
      ops.linear(h_, L.in, qkv_, Epilogue::rope_store(int32_t(l), attn_kind_, L.q_norm, L.k_norm));
      ops.attention(qkv_, attn_kind_, int32_t(l), attn_);
      ops.linear(attn_, L.out, h_, Epilogue::add_norm(x_, L.mlp_norm));
    } else {
      // in_proj → conv, gates, delta rule over the sequence's state, gated norm → out_proj
      ops.linear(h_, L.in, gdn_in_);
      ops.gated_delta_net(gdn_in_, L.gdn, gdn_out_);
      ops.linear(gdn_out_, L.out, h_, Epilogue::add_norm(x_, L.mlp_norm));
    }
    ops.linear(h_, L.gate_up, act_, Epilogue::swiglu());
    ops.linear(act_, L.down, h_, Epilogue::add_norm(x_, last ? final_norm_ : layers_[l + 1].attn_norm, last));
  }
}

}  // namespace vt
