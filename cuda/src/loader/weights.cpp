#include "loader/weights.h"

#include "status.h"

namespace vt {

namespace {

std::string shape_str(const std::vector<int64_t> &s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

class Binder {
 public:
  Binder(const Checkpoint &ck) : ck_(ck) {}

  const TensorInfo &get(const std::string &name, std::vector<int64_t> shape) {
    const TensorInfo *t = ck_.find(name);
    if (!t) fail(VT_ERR_BAD_CHECKPOINT, "tensor " + name + " is missing from the checkpoint");
    if (!t->dtype_known)
      fail(VT_ERR_UNSUPPORTED_DTYPE, "tensor " + name + " has dtype " + t->dtype_name +
                                         "; supported weight dtypes are BF16, F16 and F32");
    if (t->shape != shape)
      fail(VT_ERR_SHAPE_MISMATCH, "tensor " + name + " has shape " + shape_str(t->shape) + " but config.json implies " +
                                      shape_str(shape));
    n_params += t->nbytes / dtype_size(t->dtype);
    bytes += int64_t(t->nbytes);
    return *t;
  }

  Matrix matrix(const std::string &name, int64_t rows, int64_t cols) {
    const TensorInfo &t = get(name, {rows, cols});
    return Matrix{t.data, t.dtype, rows, cols};
  }

  std::vector<float> vec(const std::string &name, int64_t n) {
    const TensorInfo &t = get(name, {n});
    std::vector<float> out(n);
    host_bytes += n * int64_t(sizeof(float));
    for (int64_t i = 0; i < n; ++i) out[i] = load_as_f32(t.data, t.dtype, i);
    return out;
  }

  std::vector<float> optional_vec(const std::string &name, int64_t n) {
    return ck_.find(name) ? vec(name, n) : std::vector<float>();
  }

  int64_t n_params = 0, bytes = 0, host_bytes = 0;

 private:
  const Checkpoint &ck_;
};

}  // namespace

Weights bind_weights(const ModelConfig &c, const Checkpoint &ck, const std::function<void(int, int)> &progress) {
  Binder b(ck);
  Weights w;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim;
  w.embed = b.matrix("model.embed_tokens.weight", V, H);
  w.dtype = w.embed.dtype;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.attn_norm = b.vec(p + "input_layernorm.weight", H);
    L.q = b.matrix(p + "self_attn.q_proj.weight", QD, H);
    L.k = b.matrix(p + "self_attn.k_proj.weight", KVD, H);
    L.v = b.matrix(p + "self_attn.v_proj.weight", KVD, H);
    L.o = b.matrix(p + "self_attn.o_proj.weight", H, QD);
    L.q_bias = b.optional_vec(p + "self_attn.q_proj.bias", QD);
    L.k_bias = b.optional_vec(p + "self_attn.k_proj.bias", KVD);
    L.v_bias = b.optional_vec(p + "self_attn.v_proj.bias", KVD);
    L.o_bias = b.optional_vec(p + "self_attn.o_proj.bias", H);
    if (c.family == Family::Qwen2 && (L.q_bias.empty() || L.k_bias.empty() || L.v_bias.empty()))
      fail(VT_ERR_BAD_CHECKPOINT, "Qwen2 checkpoints need q/k/v projection biases; " + p + "self_attn has none");
    if (c.qk_norm) {
      L.q_norm = b.vec(p + "self_attn.q_norm.weight", c.head_dim);
      L.k_norm = b.vec(p + "self_attn.k_norm.weight", c.head_dim);
    }
    L.mlp_norm = b.vec(p + "post_attention_layernorm.weight", H);
    L.gate = b.matrix(p + "mlp.gate_proj.weight", I, H);
    L.up = b.matrix(p + "mlp.up_proj.weight", I, H);
    L.down = b.matrix(p + "mlp.down_proj.weight", H, I);
    L.gate_bias = b.optional_vec(p + "mlp.gate_proj.bias", I);
    L.up_bias = b.optional_vec(p + "mlp.up_proj.bias", I);
    L.down_bias = b.optional_vec(p + "mlp.down_proj.bias", H);
    w.layers.push_back(std::move(L));
    if (progress) progress(l + 1, c.n_layers);
  }
  w.final_norm = b.vec("model.norm.weight", H);
  if (c.tie_word_embeddings || !ck.find("lm_head.weight")) {
    if (!c.tie_word_embeddings)
      fail(VT_ERR_BAD_CHECKPOINT, "lm_head.weight is missing and config.json does not set tie_word_embeddings");
    w.lm_head = w.embed;
  } else {
    w.lm_head = b.matrix("lm_head.weight", V, H);
  }
  w.n_params = b.n_params;
  w.bytes = b.bytes;
  w.host_bytes = b.host_bytes;
  return w;
}

}  // namespace vt
