// bind_weights: a checkpoint's tensors bound by a model's schema, each checked against it, and every tensor the
// checkpoint holds accounted for (bound, knowingly skipped, or a refusal naming it).
#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string_view>

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
  explicit Binder(const Checkpoint &ck) : ck_(ck) {}

  const TensorInfo &get(const TensorSpec &s) {
    const TensorInfo *t = ck_.find(s.name);
    if (!t)
      fail(VT_ERR_BAD_CHECKPOINT, "tensor " + s.name + " is missing from the checkpoint" +
                                      (s.why ? std::string(" (") + s.why + ")" : ""));
    if (!t->dtype_known)
      fail(VT_ERR_UNSUPPORTED_DTYPE, "tensor " + s.name + " has dtype " + t->dtype_name +
                                         "; supported weight dtypes are BF16, F16 and F32");
    if (t->shape != s.shape)
      fail(VT_ERR_SHAPE_MISMATCH, "tensor " + s.name + " has shape " + shape_str(t->shape) +
                                      " but config.json implies " + shape_str(s.shape));
    n_params += t->nbytes / dtype_size(t->dtype);
    bytes += int64_t(t->nbytes);
    used_.insert(s.name);
    return *t;
  }

  Matrix matrix(const TensorSpec &s) {
    const TensorInfo &t = get(s);
    return Matrix{t.data, t.dtype, s.shape[0], s.shape[1]};
  }

  std::vector<float> vec(const TensorSpec &s) {
    const TensorInfo &t = get(s);
    int64_t n = 1;  // (every element: a conv weight (C, 1, W) is one too)
    for (int64_t d : s.shape) n *= d;
    std::vector<float> out(static_cast<size_t>(n));
    host_bytes += n * int64_t(sizeof(float));
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = load_as_f32(t.data, t.dtype, i);
    return out;
  }

  // Marks a tensor as consumed without binding it (the tied lm_head's identical copy).
  void consumed(const std::string &name) { used_.insert(name); }

  // The checkpoint's tensors nothing bound, sorted, less the ones transformers also skips on load and the ones
  // under a skipped prefix (counted into skipped_*).
  std::vector<std::string> unused_tensors(const std::vector<std::string> &skipped_prefixes) {
    std::vector<std::string> out;
    for (const auto &[name, t] : ck_.tensors()) {
      if (used_.count(name)) continue;
      // Old Llama checkpoints saved each layer's rotary inverse frequencies as a buffer; transformers ignores them
      // (they are recomputed from the config), and so do we.
      if (std::string_view(name).ends_with(".rotary_emb.inv_freq")) continue;
      const bool skipped = std::any_of(skipped_prefixes.begin(), skipped_prefixes.end(),
                                       [&](const std::string &p) { return name.rfind(p, 0) == 0; });
      if (skipped) {
        skipped_bytes += int64_t(t.nbytes), ++skipped_tensors;
        continue;
      }
      out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  int64_t n_params = 0, bytes = 0, host_bytes = 0, skipped_bytes = 0;
  int32_t skipped_tensors = 0;

 private:
  const Checkpoint &ck_;
  std::set<std::string> used_;
};

// Why a tensor nothing reads is there, when the name says: the likeliest fix for the user.
std::string unused_hint(const std::string &name, const ModelConfig &c, const WeightSchema &s) {
  auto has = [&](const char *x) { return name.find(x) != std::string::npos; };
  if (has("q_norm") || has("k_norm"))
    return c.architecture + " has no q_norm/k_norm (Qwen3 has): is `architectures` in config.json right?";
  if (has("self_attn.") && has(".bias")) {
    if (c.family == Family::Qwen2) return "Qwen2 has biases on q/k/v only";
    if (c.architecture == "MistralForCausalLM") return "MistralForCausalLM has no attention biases";
    return "config.json's attention_bias is false";
  }
  if (has("mlp.") && has(".bias"))
    return c.architecture == "LlamaForCausalLM" ? "config.json's mlp_bias is false" : c.architecture + " has no MLP biases";
  if (!s.layers_prefix.empty() && name.rfind(s.layers_prefix, 0) == 0)
    return "config.json's num_hidden_layers is " + std::to_string(c.n_layers) + "; is the architecture right?";
  return "is `architectures` in config.json right?";
}

// Tied embeddings: the engine projects with the embedding. A checkpoint may still store lm_head.weight; an exact
// copy of the embedding is harmless (some exporters write both), anything else contradicts the config.
bool same_tensor(const TensorInfo &a, const TensorInfo &b) {
  return a.dtype_name == b.dtype_name && a.shape == b.shape && a.nbytes == b.nbytes &&
         (a.data == b.data || std::memcmp(a.data, b.data, a.nbytes) == 0);
}

const TensorSpec *find_role(const WeightSchema &s, Role r) {
  for (const TensorSpec &t : s.tensors)
    if (t.role == r && t.layer == -1) return &t;
  return nullptr;
}

// The lm_head: the embedding's view when tied (a stored copy must be identical), else its own matrix, whose
// absence says which config field would explain it.
void bind_lm_head(const TensorSpec &t, const WeightSchema &s, const Checkpoint &ck, Binder &b, Weights &w) {
  const TensorInfo *head = ck.find(t.name);
  if (s.tied_lm_head) {
    const TensorSpec *embed = find_role(s, Role::kEmbed);
    if (!embed) throw std::logic_error("weight schema: a tied lm_head needs an embedding");
    w.set(t.role, t.layer, w.matrix(Role::kEmbed));
    if (head) {
      if (!same_tensor(*head, *ck.find(embed->name)))
        fail(VT_ERR_BAD_CHECKPOINT, "config.json sets tie_word_embeddings, but the checkpoint's " + t.name +
                                        " differs from " + embed->name +
                                        ": set tie_word_embeddings to false to use it, or drop it");
      b.consumed(t.name);
    }
  } else {
    if (!head) fail(VT_ERR_BAD_CHECKPOINT, t.name + " is missing and config.json does not set tie_word_embeddings");
    w.set(t.role, t.layer, b.matrix(t));
  }
}

}  // namespace

Weights bind_weights(const ModelConfig &c, const WeightSchema &s, const Checkpoint &ck,
                     const std::function<void(int, int)> &progress) {
  Binder b(ck);
  Weights w(s);
  bool have_dtype = false;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const TensorSpec &t = s.tensors[i];
    if (t.absent) {  // (Weights(s) declared it empty)
    } else if (t.role == Role::kLmHead) {
      bind_lm_head(t, s, ck, b, w);
    } else if (t.kind == TensorSpec::kMatrix) {
      const Matrix m = b.matrix(t);
      if (!have_dtype) w.dtype = m.dtype, have_dtype = true;  // the first matrix: the embedding, the dominant one
      w.set(t.role, t.layer, m);
    } else {
      w.set(t.role, t.layer, b.vec(t));
    }
    const bool layer_done = t.layer >= 0 && (i + 1 == s.tensors.size() || s.tensors[i + 1].layer != t.layer);
    if (layer_done && progress) progress(t.layer + 1, w.n_layers());
  }
  // Every tensor is read by something: one left over means the config describes another model than the weights
  // (a Qwen3 declared as Llama leaves q_norm/k_norm; attention_bias false leaves the biases), which would compute
  // without them and without a word.
  if (const auto unused = b.unused_tensors(s.skipped_prefixes); !unused.empty())
    fail(VT_ERR_BAD_CHECKPOINT, "tensor " + unused[0] + " is in the checkpoint but a " + c.architecture +
                                    " with this config.json does not use it (" + unused_hint(unused[0], c, s) + ")" +
                                    (unused.size() > 1 ? "; " + std::to_string(unused.size() - 1) + " more unused" : ""));
  w.n_params = b.n_params;
  w.bytes = b.bytes;
  w.host_bytes = b.host_bytes;
  w.skipped_bytes = b.skipped_bytes;
  w.skipped_tensors = b.skipped_tensors;
  return w;
}

}  // namespace vt
