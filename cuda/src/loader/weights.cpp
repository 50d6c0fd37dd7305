#include "loader/weights.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

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
    used_.insert(name);
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

  // A bias the config says this projection has (a missing one is an error), or none (a present one is then left
  // unused, which unused_tensors() reports).
  std::vector<float> bias(bool expected, const std::string &name, int64_t n, const char *why) {
    if (!expected) return {};
    if (!ck_.find(name)) fail(VT_ERR_BAD_CHECKPOINT, "tensor " + name + " is missing from the checkpoint (" + why + ")");
    return vec(name, n);
  }

  // Marks a tensor as consumed without binding it (the tied lm_head's identical copy).
  void consumed(const std::string &name) { used_.insert(name); }

  // The checkpoint's tensors nothing bound, sorted, less the ones transformers also skips on load.
  std::vector<std::string> unused_tensors() const {
    std::vector<std::string> out;
    for (const auto &[name, t] : ck_.tensors()) {
      // Old Llama checkpoints saved each layer's rotary inverse frequencies as a buffer; transformers ignores them
      // (they are recomputed from the config), and so do we.
      const std::string_view inv_freq = ".rotary_emb.inv_freq";
      const bool ignored = std::string_view(name).ends_with(inv_freq);
      if (!used_.count(name) && !ignored) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  int64_t n_params = 0, bytes = 0, host_bytes = 0;

 private:
  const Checkpoint &ck_;
  std::set<std::string> used_;
};

// Why a tensor nothing reads is there, when the name says: the likeliest fix for the user.
std::string unused_hint(const std::string &name, const ModelConfig &c) {
  auto has = [&](const char *s) { return name.find(s) != std::string::npos; };
  if (has("q_norm") || has("k_norm"))
    return c.architecture + " has no q_norm/k_norm (Qwen3 has): is `architectures` in config.json right?";
  if (has("self_attn.") && has(".bias")) {
    if (c.family == Family::Qwen2) return "Qwen2 has biases on q/k/v only";
    if (c.architecture == "MistralForCausalLM") return "MistralForCausalLM has no attention biases";
    return "config.json's attention_bias is false";
  }
  if (has("mlp.") && has(".bias"))
    return c.architecture == "LlamaForCausalLM" ? "config.json's mlp_bias is false" : c.architecture + " has no MLP biases";
  if (name.rfind("model.layers.", 0) == 0)
    return "config.json's num_hidden_layers is " + std::to_string(c.n_layers) + "; is the architecture right?";
  return "is `architectures` in config.json right?";
}

// Tied embeddings: the engine projects with the embedding. A checkpoint may still store lm_head.weight; an exact
// copy of the embedding is harmless (some exporters write both), anything else contradicts the config.
bool same_tensor(const TensorInfo &a, const TensorInfo &b) {
  return a.dtype_name == b.dtype_name && a.shape == b.shape && a.nbytes == b.nbytes &&
         (a.data == b.data || std::memcmp(a.data, b.data, a.nbytes) == 0);
}

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
    const char *attn_why = c.family == Family::Qwen2 ? "a Qwen2ForCausalLM has q/k/v biases" : "config.json's attention_bias is true";
    L.q_bias = b.bias(c.qkv_bias, p + "self_attn.q_proj.bias", QD, attn_why);
    L.k_bias = b.bias(c.qkv_bias, p + "self_attn.k_proj.bias", KVD, attn_why);
    L.v_bias = b.bias(c.qkv_bias, p + "self_attn.v_proj.bias", KVD, attn_why);
    L.o_bias = b.bias(c.o_bias, p + "self_attn.o_proj.bias", H, attn_why);
    if (c.qk_norm) {
      L.q_norm = b.vec(p + "self_attn.q_norm.weight", c.head_dim);
      L.k_norm = b.vec(p + "self_attn.k_norm.weight", c.head_dim);
    }
    L.mlp_norm = b.vec(p + "post_attention_layernorm.weight", H);
    L.gate = b.matrix(p + "mlp.gate_proj.weight", I, H);
    L.up = b.matrix(p + "mlp.up_proj.weight", I, H);
    L.down = b.matrix(p + "mlp.down_proj.weight", H, I);
    L.gate_bias = b.bias(c.mlp_bias, p + "mlp.gate_proj.bias", I, "config.json's mlp_bias is true");
    L.up_bias = b.bias(c.mlp_bias, p + "mlp.up_proj.bias", I, "config.json's mlp_bias is true");
    L.down_bias = b.bias(c.mlp_bias, p + "mlp.down_proj.bias", H, "config.json's mlp_bias is true");
    w.layers.push_back(std::move(L));
    if (progress) progress(l + 1, c.n_layers);
  }
  w.final_norm = b.vec("model.norm.weight", H);
  const TensorInfo *head = ck.find("lm_head.weight");
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
    if (head) {
      if (!same_tensor(*head, *ck.find("model.embed_tokens.weight")))
        fail(VT_ERR_BAD_CHECKPOINT, "config.json sets tie_word_embeddings, but the checkpoint's lm_head.weight differs from "
                                    "model.embed_tokens.weight: set tie_word_embeddings to false to use it, or drop it");
      b.consumed("lm_head.weight");
    }
  } else {
    if (!head) fail(VT_ERR_BAD_CHECKPOINT, "lm_head.weight is missing and config.json does not set tie_word_embeddings");
    w.lm_head = b.matrix("lm_head.weight", V, H);
  }
  // Every tensor is read by something: one left over means the config describes another model than the weights
  // (a Qwen3 declared as Llama leaves q_norm/k_norm; attention_bias false leaves the biases), which would compute
  // without them and without a word.
  if (const auto unused = b.unused_tensors(); !unused.empty())
    fail(VT_ERR_BAD_CHECKPOINT, "tensor " + unused[0] + " is in the checkpoint but a " + c.architecture +
                                    " with this config.json does not use it (" + unused_hint(unused[0], c) + ")" +
                                    (unused.size() > 1 ? "; " + std::to_string(unused.size() - 1) + " more unused" : ""));
  w.n_params = b.n_params;
  w.bytes = b.bytes;
  w.host_bytes = b.host_bytes;
  return w;
}

}  // namespace vt
