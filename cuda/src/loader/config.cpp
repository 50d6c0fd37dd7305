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

// A size: a positive integer (not 64.0, not "64"), at most 2^30 so every product of two fits in int64.
int32_t positive(const json &cfg, const char *key, std::optional<int32_t> fallback = std::nullopt) {
  const auto v = json_integer(cfg, key, kConfig);
  if (!v) {
    if (fallback) return *fallback;
    fail(VT_ERR_BAD_CHECKPOINT, kConfig + ": `" + key + "` is missing (a positive integer)");
  }
  if (*v <= 0 || *v > (int64_t(1) << 30))
    fail(VT_ERR_BAD_CHECKPOINT, kConfig + ": `" + key + "` must be a positive integer (at most 2^30), not " + std::to_string(*v));
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

// transformers 5 keeps the rotary settings under rope_parameters; the Hub's classic form is rope_theta +
// rope_scaling. Read here; whether the engine computes what they ask is config_arithmetic.cpp's to judge.
void read_rope(const json &cfg, RopeConfig &r) {
  const json *params = json_field(cfg, "rope_parameters");
  const json *scaling = json_field(cfg, "rope_scaling");
  const json *s = params && params->is_object() ? params : scaling && scaling->is_object() ? scaling : nullptr;
  r.theta = json_number(cfg, "rope_theta", kConfig).value_or(10000.0);
  if (!s) return;
  const std::string where = kConfig + ": " + (s == params ? "rope_parameters" : "rope_scaling");
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

}  // namespace

ModelConfig parse_model_config(std::string_view config_json, std::optional<std::string_view> generation_json) {
  const json cfg = parse_json_object(config_json, kConfig);
  ModelConfig c;
  if (const json *a = json_field(cfg, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    c.architecture = (*a)[0].get<std::string>();
  if (c.architecture.empty()) fail(VT_ERR_BAD_CHECKPOINT, "config.json has no `architectures` entry");
  const std::string &arch = c.architecture;
  const ModelEntry *entry = find_model(arch);
  if (!entry)
    fail(VT_ERR_UNSUPPORTED_ARCH,
         "architecture `" + arch + "` is not supported (supported: " + supported_architectures() + ")");
  c.family = entry->family;
  c.model_type = json_string(cfg, "model_type", kConfig).value_or("");

  c.vocab_size = positive(cfg, "vocab_size");
  c.hidden_size = positive(cfg, "hidden_size");
  c.intermediate_size = positive(cfg, "intermediate_size");
  c.n_layers = positive(cfg, "num_hidden_layers");
  c.n_heads = positive(cfg, "num_attention_heads");
  c.n_kv_heads = positive(cfg, "num_key_value_heads", c.n_heads);
  c.head_dim = positive(cfg, "head_dim", c.hidden_size / c.n_heads);  // config_arithmetic checks the division
  c.max_position_embeddings = positive(cfg, "max_position_embeddings");
  c.rms_norm_eps = float(json_number(cfg, "rms_norm_eps", kConfig).value_or(1e-6));  // range: config_arithmetic
  c.tie_word_embeddings = json_bool(cfg, "tie_word_embeddings", kConfig).value_or(false);
  c.qk_norm = c.family == Family::Qwen3;
  // Biases as each family's modeling file builds them (transformers 5); the fields other families carry are
  // not read by transformers for this one, so not here either.
  if (arch == "LlamaForCausalLM") {
    c.qkv_bias = c.o_bias = json_bool(cfg, "attention_bias", kConfig).value_or(false);
    c.mlp_bias = json_bool(cfg, "mlp_bias", kConfig).value_or(false);
  } else if (c.family == Family::Qwen2) {
    c.qkv_bias = true;
  } else if (c.family == Family::Qwen3) {
    c.qkv_bias = c.o_bias = json_bool(cfg, "attention_bias", kConfig).value_or(false);
  }
  auto dtype = json_string(cfg, "torch_dtype", kConfig);
  c.torch_dtype = dtype ? *dtype : json_string(cfg, "dtype", kConfig).value_or("");
  read_rope(cfg, c.rope);
  check_config_arithmetic(cfg, c);

  c.bos_token_id = single_token_id(cfg, "bos_token_id", kConfig, -1);
  c.eos_token_ids = token_ids(cfg, "eos_token_id", kConfig);
  if (generation_json) {
    const std::string gen_name = "generation_config.json";
    const json gen = parse_json_object(*generation_json, gen_name);
    auto ids = token_ids(gen, "eos_token_id", gen_name);
    if (!ids.empty()) c.eos_token_ids = ids;  // generation_config.json wins, as in transformers
    c.bos_token_id = single_token_id(gen, "bos_token_id", gen_name, c.bos_token_id);
  }
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
  const RopeConfig &r = c.rope;
  const int dim = c.head_dim;
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
