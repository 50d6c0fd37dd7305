#include "loader/config.h"

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "loader/config_arithmetic.h"
#include "loader/json_fields.h"
#include "loader/json_file.h"
#include "models/registry.h"
#include "status.h"

namespace vt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kConfig = "config.json";

// A size: a positive integer (not 64.0, not "64"), at most 2^30 so every product of two fits in int64. `where`
// names the object in messages ("config.json", or "config.json: text_config" where the text model's fields nest).
int32_t positive(const json &obj, const std::string &where, const char *key, std::optional<int32_t> fallback = std::nullopt) {
  const auto v = json_integer(obj, key, where);
  if (!v) {
    if (fallback) return *fallback;
    fail(VT_ERR_BAD_CHECKPOINT, where + ": `" + key + "` is missing (a positive integer)");
  }
  if (*v <= 0 || *v > (int64_t(1) << 30))
    fail(VT_ERR_BAD_CHECKPOINT, where + ": `" + key + "` must be a positive integer (at most 2^30), not " + std::to_string(*v));
  return int32_t(*v);
}

// eos_token_id / bos_token_id: one token id or a list of them, each an integer in [0, 2^31).
std::vector<int32_t> token_ids(const json &obj, const char *key, const std::string &where) {
  std::vector<int32_t> out;
  const json *v = json_field(obj, key);
  if (!v) return out;
  auto one = [&](const json &x) {
    const bool ok = x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t(INT32_MAX)
                                           : x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX;
    if (!ok) fail(VT_ERR_BAD_CHECKPOINT, where + ": `" + key + "` must be a token id or a list of them; it holds " + describe_json(x));
    out.push_back(int32_t(x.get<int64_t>()));
  };
  if (v->is_array()) {
    // [] would read as "not given": transformers has no meaning for an empty list of ids either.
    if (v->empty()) fail(VT_ERR_BAD_CHECKPOINT, where + ": `" + key + "` is an empty list: give a token id or leave it out");
    for (const json &x : *v) one(x);
  }
  else
    one(*v);
  return out;
}

int32_t single_token_id(const json &obj, const char *key, const std::string &where, int32_t fallback) {
  const auto ids = token_ids(obj, key, where);
  if (ids.size() > 1) fail(VT_ERR_BAD_CHECKPOINT, where + ": `" + key + "` must be one token id, not a list of " + std::to_string(ids.size()));
  return ids.empty() ? fallback : ids[0];
}

// The object that holds the rotary settings: transformers 5 keeps them under rope_parameters, the Hub's classic
// form is rope_theta + rope_scaling. Null when neither is an object (config_arithmetic refuses other types).
const json *rope_object(const json &cfg, std::string *name) {
  const json *params = json_field(cfg, "rope_parameters");
  const json *scaling = json_field(cfg, "rope_scaling");
  const json *s = params && params->is_object() ? params : scaling && scaling->is_object() ? scaling : nullptr;
  if (name) *name = s == params ? "rope_parameters" : "rope_scaling";
  return s;
}

// Read here; whether the engine computes what they ask is config_arithmetic.cpp's to judge.
void read_rope(const json &cfg, const std::string &where_cfg, RopeConfig &r) {
  std::string name;
  const json *s = rope_object(cfg, &name);
  r.theta = json_number(cfg, "rope_theta", where_cfg).value_or(10000.0);
  if (!s) return;
  const std::string where = where_cfg + ": " + name;
  r.theta = json_number(*s, "rope_theta", where).value_or(r.theta);
  auto type = json_string(*s, "rope_type", where);
  r.type = type ? *type : json_string(*s, "type", where).value_or("default");
  r.factor = json_number(*s, "factor", where).value_or(0.0);  // 0 = absent (yarn then derives it)
  r.low_freq_factor = json_number(*s, "low_freq_factor", where).value_or(1.0);
  r.high_freq_factor = json_number(*s, "high_freq_factor", where).value_or(4.0);
  r.original_max_position_embeddings = json_integer(*s, "original_max_position_embeddings", where).value_or(0);
  r.beta_fast = json_number(*s, "beta_fast", where).value_or(0.0);
  r.beta_slow = json_number(*s, "beta_slow", where).value_or(0.0);
  if (r.beta_fast == 0) r.beta_fast = 32.0;  // transformers treats 0 / null as unset
  if (r.beta_slow == 0) r.beta_slow = 1.0;
  r.mscale = json_number(*s, "mscale", where).value_or(0.0);
  r.mscale_all_dim = json_number(*s, "mscale_all_dim", where).value_or(0.0);
  r.attention_factor = json_number(*s, "attention_factor", where).value_or(0.0);
  r.truncate = json_bool(*s, "truncate", where).value_or(true);
}

bool is_hybrid(Family f) { return f == Family::Qwen3_5 || f == Family::Qwen3_5Moe; }

// Where the text model's fields are. A ConditionalGeneration reads them from text_config only: without one,
// transformers builds Qwen3_5TextConfig's defaults and ignores top-level sizes, so such a file describes another
// model than it seems to. A ForCausalLM takes text_config when there is one (transformers' text config class
// loads its base_config_key from a composite file), else the top level.
const json &text_fields(const json &cfg, const ModelEntry &e, std::string *where) {
  *where = kConfig;
  if (!e.composite()) return cfg;
  const json *text = json_field(cfg, "text_config");
  if (text && !text->is_object())
    fail(VT_ERR_BAD_CHECKPOINT, kConfig + ": `text_config` must be an object (the text model's fields), not " + describe_json(*text));
  if (!text && e.vision_tower)
    fail(VT_ERR_BAD_CHECKPOINT, kConfig + ": " + e.architecture +
                                    " has no `text_config`: transformers would build its default text model and ignore "
                                    "any top-level sizes; nest the text model's fields under text_config");
  if (!text) return cfg;
  *where = kConfig + ": text_config";
  return *text;
}

// layer_types (transformers' legacy spellings "attention" and "mamba" too), or transformers' default from
// full_attention_interval (4 when absent): layer i is full attention when i + 1 is a multiple of the interval —
// three Gated DeltaNet layers, then one attention layer, repeating.
std::vector<LayerKind> read_layer_kinds(const json &text, const std::string &where, int32_t n_layers) {
  std::vector<LayerKind> kinds;
  const json *types = json_field(text, "layer_types");
  if (!types) {
    const int32_t interval = positive(text, where, "full_attention_interval", 4);
    for (int32_t i = 0; i < n_layers; ++i)
      kinds.push_back((i + 1) % interval ? LayerKind::LinearAttention : LayerKind::Attention);
    return kinds;
  }
  if (!types->is_array())
    fail(VT_ERR_BAD_CHECKPOINT, where + ": `layer_types` must be a list of num_hidden_layers strings, not " + describe_json(*types));
  if (types->size() != size_t(n_layers))
    fail(VT_ERR_BAD_CHECKPOINT, where + ": `layer_types` has " + std::to_string(types->size()) +
                                    " entries but num_hidden_layers is " + std::to_string(n_layers) + ": one per layer");
  for (size_t i = 0; i < types->size(); ++i) {
    const json &t = (*types)[i];
    const std::string at = where + ": layer_types[" + std::to_string(i) + "]";
    if (!t.is_string()) fail(VT_ERR_BAD_CHECKPOINT, at + " must be a string, not " + describe_json(t));
    const std::string &s = t.get_ref<const std::string &>();
    if (s == "full_attention" || s == "attention") kinds.push_back(LayerKind::Attention);
    else if (s == "linear_attention" || s == "mamba") kinds.push_back(LayerKind::LinearAttention);
    // transformers builds such a layer with no token mixer at all: no model was trained that way.
    else
      fail(VT_ERR_BAD_CHECKPOINT, at + " is " + describe_json(t) + ": a Qwen3.5 layer is \"linear_attention\" or \"full_attention\"");
  }
  return kinds;
}

// head_dim x partial_rotary_factor: the factor from the rotary settings' object, else the top level, else
// Qwen3_5TextConfig's default 0.25 (transformers 5 fills the object from the other two only where it has none).
// transformers takes int() of the product; a product that is not a whole, even number of dims rotates a part of a
// pair (or builds cos/sin tables longer than the part they rotate), so it is refused rather than truncated.
int32_t read_rotary_dims(const json &text, const std::string &where, int32_t head_dim) {
  std::string name;
  const json *rope = rope_object(text, &name);
  std::optional<double> f = rope ? json_number(*rope, "partial_rotary_factor", where + ": " + name) : std::nullopt;
  std::string from = where + ": " + name + ".partial_rotary_factor";
  if (!f) {
    f = json_number(text, "partial_rotary_factor", where);
    from = where + (f ? ": partial_rotary_factor" : ": partial_rotary_factor (absent: Qwen3_5TextConfig's default)");
  }
  const double factor = f.value_or(0.25);
  auto num = [](double v) { return json(v).dump(); };
  if (!(factor > 0 && factor <= 1))
    fail(VT_ERR_BAD_CHECKPOINT, from + " " + num(factor) + " must be in (0, 1]: the share of each head that RoPE rotates");
  const double dims = double(head_dim) * factor, whole = std::round(dims);
  if (std::fabs(dims - whole) > 1e-9 * whole || int64_t(whole) % 2 != 0 || whole < 2)
    fail(VT_ERR_BAD_CHECKPOINT, from + " " + num(factor) + " of head_dim " + std::to_string(head_dim) + " gives " + num(dims) +
                                    " rotary dims: RoPE rotates pairs of dims, so it must give a whole, even number");
  return int32_t(whole);
}

// The hybrid Qwen3.5 / 3.6 layers (transformers' Qwen3_5TextConfig and Qwen3_5MoeTextConfig, read where their
// modeling file reads them; defaults as those classes give them).
void read_hybrid(const json &cfg, const json &text, const std::string &where, const ModelEntry &p, ModelConfig &c) {
  c.layer_kinds = read_layer_kinds(text, where, c.n_layers);
  // RoPE over part of each head. mrope_section / mrope_interleaved split the rotary frequencies among three
  // position ids (time, height, width of an image's grid); for text all three are the token's position, so the
  // split changes nothing and it is plain 1-D RoPE over the first rotary_dims (config_arithmetic checks their types).
  c.rotary_dims = read_rotary_dims(text, where, c.head_dim);
  // transformers' attention always gates (q_proj is 2 x num_heads x head_dim rows); vLLM reads this flag
  // (default true). config_arithmetic refuses false: the two would build different models from the file.
  c.attn_output_gate = json_bool(text, "attn_output_gate", where).value_or(true);
  c.gdn.n_k_heads = positive(text, where, "linear_num_key_heads", 16);
  c.gdn.n_v_heads = positive(text, where, "linear_num_value_heads", 32);
  c.gdn.k_dim = positive(text, where, "linear_key_head_dim", 128);
  c.gdn.v_dim = positive(text, where, "linear_value_head_dim", 128);
  c.gdn.conv_kernel = positive(text, where, "linear_conv_kernel_dim", 4);
  // Not a transformers field (it skips mtp.* weights); Qwen's configs carry it, vLLM reads it for speculation.
  const int64_t mtp = json_integer(text, "mtp_num_hidden_layers", where).value_or(0);
  if (mtp < 0 || mtp > (int64_t(1) << 30))
    fail(VT_ERR_BAD_CHECKPOINT, where + ": `mtp_num_hidden_layers` must be 0 or a positive integer, not " + std::to_string(mtp));
  c.mtp_layers = int32_t(mtp);
  const json *vision = json_field(cfg, "vision_config");
  if (vision && !vision->is_object())
    fail(VT_ERR_BAD_CHECKPOINT, kConfig + ": `vision_config` must be an object, not " + describe_json(*vision));
  // A ConditionalGeneration builds a tower even without vision_config (from its defaults); a ForCausalLM that
  // carries one skips the tower's weights as transformers does (model.visual.*).
  c.vision_tower = p.vision_tower || vision;
}

// tie_word_embeddings belongs to the config of the class that holds lm_head (transformers 5): a
// ConditionalGeneration's top level (Qwen3_5Config, default false), a ForCausalLM's text config (default false).
// Readers that follow transformers 4 take text_config's for a composite file, so where both levels give a value
// they must agree: otherwise one reader ties lm_head to the embeddings and another loads it.
bool read_tie(const json &cfg, const json &text, const std::string &where, const ModelEntry &p) {
  const bool nested = &text != &cfg;
  const auto top = json_bool(cfg, "tie_word_embeddings", kConfig);
  if (!nested) return top.value_or(false);
  const auto inner = json_bool(text, "tie_word_embeddings", where);
  const bool from_top = p.vision_tower;
  const bool tie = (from_top ? top : inner).value_or(false);
  const auto other = from_top ? inner : top;
  if (other && *other != tie)
    fail(VT_ERR_BAD_CHECKPOINT, kConfig + ": tie_word_embeddings is " + (top ? (*top ? "true" : "false") : "absent (false)") +
                                    " at the top level but " + (inner ? (*inner ? "true" : "false") : "absent (false)") +
                                    " in text_config: readers differ on which one ties lm_head; give both the same value");
  return tie;
}

}  // namespace

ModelConfig parse_recognised_config(std::string_view config_json, std::optional<std::string_view> generation_json) {
  const json cfg = parse_json_object(config_json, kConfig);
  ModelConfig c;
  if (const json *a = json_field(cfg, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    c.architecture = (*a)[0].get<std::string>();
  if (c.architecture.empty()) fail(VT_ERR_BAD_CHECKPOINT, "config.json has no `architectures` entry");
  const std::string &arch = c.architecture;
  const ModelEntry *entry = find_model(arch);  // (supported or not: this reads and checks either)
  if (!entry)
    fail(VT_ERR_UNSUPPORTED_ARCH,
         "architecture `" + arch + "` is not supported (supported: " + supported_architectures() + ")");
  c.family = entry->family;
  const bool hybrid = is_hybrid(c.family);
  c.model_type = json_string(cfg, "model_type", kConfig).value_or("");
  std::string where;
  const json &text = text_fields(cfg, *entry, &where);

  c.vocab_size = positive(text, where, "vocab_size");
  c.hidden_size = positive(text, where, "hidden_size");
  // Qwen3.5 MoE has no dense MLP (its experts' sizes are read when its model lands): 0.
  c.intermediate_size = c.family == Family::Qwen3_5Moe ? 0 : positive(text, where, "intermediate_size");
  c.n_layers = positive(text, where, "num_hidden_layers");
  c.n_heads = positive(text, where, "num_attention_heads");
  // Qwen3.5's classes default these to the released models' values, not to the Llama conventions.
  const int32_t kv_default = c.family == Family::Qwen3_5 ? 4 : c.family == Family::Qwen3_5Moe ? 2 : c.n_heads;
  c.n_kv_heads = positive(text, where, "num_key_value_heads", kv_default);
  // Qwen3.5's default is 256; the others' hidden_size / num_attention_heads, a division config_arithmetic checks.
  c.head_dim = positive(text, where, "head_dim", hybrid ? 256 : c.hidden_size / c.n_heads);
  c.max_position_embeddings = positive(text, where, "max_position_embeddings");
  c.rms_norm_eps = float(json_number(text, "rms_norm_eps", where).value_or(1e-6));  // range: config_arithmetic
  c.tie_word_embeddings = read_tie(cfg, text, where, *entry);
  c.qk_norm = c.family == Family::Qwen3 || hybrid;
  // Biases as each family's modeling file builds them (transformers 5); the fields other families carry are
  // not read by transformers for this one, so not here either.
  if (arch == "LlamaForCausalLM") {
    c.qkv_bias = c.o_bias = json_bool(cfg, "attention_bias", kConfig).value_or(false);
    c.mlp_bias = json_bool(cfg, "mlp_bias", kConfig).value_or(false);
  } else if (c.family == Family::Qwen2) {
    c.qkv_bias = true;
  } else if (c.family == Family::Qwen3 || hybrid) {
    c.qkv_bias = c.o_bias = json_bool(text, "attention_bias", where).value_or(false);
  }
  // The dtype the top level declares (transformers loads by it), else the text config's.
  auto dtype_of = [](const json &o, const std::string &at) {
    auto dtype = json_string(o, "torch_dtype", at);
    return dtype ? *dtype : json_string(o, "dtype", at).value_or("");
  };
  c.torch_dtype = dtype_of(cfg, kConfig);
  if (c.torch_dtype.empty() && &text != &cfg) c.torch_dtype = dtype_of(text, where);
  read_rope(text, where, c.rope);
  c.rotary_dims = c.head_dim;
  c.layer_kinds.assign(size_t(c.n_layers), LayerKind::Attention);
  if (hybrid) read_hybrid(cfg, text, where, *entry, c);
  check_config_arithmetic(cfg, text, where, c);

  // Token ids from the top level, else (a composite file) the text config's, as transformers' generation config
  // takes them from the decoder's config when the top level has none.
  c.bos_token_id = single_token_id(cfg, "bos_token_id", kConfig, -1);
  c.eos_token_ids = token_ids(cfg, "eos_token_id", kConfig);
  if (&text != &cfg) {
    if (c.bos_token_id < 0) c.bos_token_id = single_token_id(text, "bos_token_id", where, -1);
    if (c.eos_token_ids.empty()) c.eos_token_ids = token_ids(text, "eos_token_id", where);
  }
  if (generation_json) {
    const std::string gen_name = "generation_config.json";
    const json gen = parse_json_object(*generation_json, gen_name);
    auto ids = token_ids(gen, "eos_token_id", gen_name);
    if (!ids.empty()) c.eos_token_ids = ids;  // generation_config.json wins, as in transformers
    c.bos_token_id = single_token_id(gen, "bos_token_id", gen_name, c.bos_token_id);
  }
  return c;
}

ModelConfig parse_model_config(std::string_view config_json, std::optional<std::string_view> generation_json) {
  ModelConfig c = parse_recognised_config(config_json, generation_json);
  model_entry(c);  // (a recognised architecture without a model: refused, saying so)
  return c;
}

ModelConfig load_model_config(const std::string &dir) {
  const fs::path root(dir);
  const auto config = read_checkpoint_file(root / "config.json");
  if (!config)
    fail(VT_ERR_MISSING_FILE, "missing config.json in " + dir + " (a Hugging Face checkpoint folder needs config.json)");
  const auto generation = read_checkpoint_file(root / "generation_config.json");
  return parse_model_config(*config, generation ? std::optional<std::string_view>(*generation) : std::nullopt);
}

void rope_tables(const ModelConfig &c, std::vector<float> *inv_freq_out, float *attn_scale) {
  // RoPE turns the leading rotary_dims of each head (Qwen3.5: a quarter of them); the frequencies are over those.
  rope_tables(c, c.rotary_dims > 0 ? c.rotary_dims : c.head_dim, inv_freq_out, attn_scale);
}

void rope_tables(const ModelConfig &c, int32_t dims, std::vector<float> *inv_freq_out, float *attn_scale) {
  const RopeConfig &r = c.rope;
  const int dim = dims;
  const int half = dim / 2;
  std::vector<double> inv(half);
  // transformers computes the base frequencies in float32; match that rounding, then work in double.
  for (int i = 0; i < half; ++i) {
    float exponent = float(2 * i) / float(dim);
    float pos_freq = std::pow(float(r.theta), exponent);
    inv[i] = 1.0 / double(pos_freq);
  }
  double scale = 1.0;
  if (r.type == "linear") {
    for (auto &f : inv) f /= r.factor;
  } else if (r.type == "llama3") {
    // transformers 5: a missing original length defaults to max_position_embeddings
    const double old_ctx = double(r.original_max_position_embeddings > 0 ? r.original_max_position_embeddings
                                                                          : c.max_position_embeddings);
    const double low_wavelen = old_ctx / r.low_freq_factor;
    const double high_wavelen = old_ctx / r.high_freq_factor;
    for (auto &f : inv) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / r.factor;
      } else if (wavelen >= high_wavelen) {  // medium frequencies: blend
        const double smooth = (old_ctx / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = (1 - smooth) * f / r.factor + smooth * f;
      }
    }
  } else if (r.type == "yarn") {
    // As transformers 5.17: the original length defaults to max_position_embeddings; an explicit factor wins,
    // and only a missing one is derived as max_position_embeddings / original.
    const double orig = double(r.original_max_position_embeddings > 0 ? r.original_max_position_embeddings
                                                                      : c.max_position_embeddings);
    const double factor = r.factor > 0 ? r.factor : double(c.max_position_embeddings) / orig;
    auto get_mscale = [](double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; };
    if (r.attention_factor > 0) scale = r.attention_factor;
    else if (r.mscale > 0 && r.mscale_all_dim > 0) scale = get_mscale(factor, r.mscale) / get_mscale(factor, r.mscale_all_dim);
    else scale = get_mscale(factor, 1.0);
    auto correction_dim = [&](double rotations) {
      return (dim * std::log(orig / (rotations * 2 * M_PI))) / (2 * std::log(r.theta));
    };
    double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
    if (r.truncate) { low = std::floor(low); high = std::ceil(high); }
    low = std::max(low, 0.0);
    high = std::min(high, double(dim - 1));
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;  // share of the unscaled frequency
      inv[i] = (inv[i] / factor) * (1 - extrapolation) + inv[i] * extrapolation;
    }
  }
  // A backstop behind config_arithmetic's range checks: a table that is not finite in float32 would compute
  // garbage without a word (and converting an out-of-range double to float is undefined behaviour).
  auto representable = [](double v) { return std::isfinite(v) && std::fabs(v) <= double(FLT_MAX); };
  bool ok = representable(scale);
  for (double f : inv) ok = ok && representable(f);
  if (!ok)
    fail(VT_ERR_BAD_CHECKPOINT, "config.json: the RoPE parameters (type " + r.type + ", theta " + std::to_string(r.theta) +
                                    ", factor " + std::to_string(r.factor) + ") give frequencies that are not finite");
  inv_freq_out->assign(inv.begin(), inv.end());
  *attn_scale = float(scale);
}

}  // namespace vt
