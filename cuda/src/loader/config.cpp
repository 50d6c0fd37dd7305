#include "loader/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "status.h"

namespace vt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path &path, bool required) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (required) fail(VT_ERR_MISSING_FILE, "missing " + path.filename().string() + " in " + path.parent_path().string() +
                                                " (a Hugging Face checkpoint folder needs config.json)");
    return json::object();
  }
  try {
    json j = json::parse(in);
    if (!j.is_object()) fail(VT_ERR_BAD_CHECKPOINT, path.string() + " is not a JSON object");
    return j;
  } catch (const json::exception &e) {
    fail(VT_ERR_BAD_CHECKPOINT, path.string() + " is not valid JSON: " + e.what());
  }
}

template <typename T>
T get_or(const json &j, const char *key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception &) {
    fail(VT_ERR_BAD_CHECKPOINT, std::string("config.json: `") + key + "` has the wrong type");
  }
}

int32_t require_positive(const json &j, const char *key) {
  int64_t v = get_or<int64_t>(j, key, 0);
  if (v <= 0 || v > (1 << 30)) fail(VT_ERR_BAD_CHECKPOINT, std::string("config.json: `") + key + "` must be a positive integer");
  return int32_t(v);
}

std::vector<int32_t> id_list(const json &v) {
  std::vector<int32_t> out;
  if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  if (v.is_array())
    for (auto &x : v)
      if (x.is_number_integer()) out.push_back(x.get<int32_t>());
  return out;
}

void read_rope(const json &cfg, RopeConfig &r) {
  // transformers 5 keeps everything under rope_parameters; the Hub's classic form is rope_theta + rope_scaling.
  json params = cfg.contains("rope_parameters") && cfg["rope_parameters"].is_object() ? cfg["rope_parameters"] : json();
  json scaling = cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object() ? cfg["rope_scaling"] : json();
  const json &s = params.is_object() ? params : scaling;
  r.theta = get_or<double>(cfg, "rope_theta", 10000.0);
  if (s.is_object()) {
    r.theta = get_or<double>(s, "rope_theta", r.theta);
    r.type = get_or<std::string>(s, "rope_type", get_or<std::string>(s, "type", "default"));
    r.factor = get_or<double>(s, "factor", 0.0);  // 0 = absent (yarn then derives it)
    r.low_freq_factor = get_or<double>(s, "low_freq_factor", 1.0);
    r.high_freq_factor = get_or<double>(s, "high_freq_factor", 4.0);
    r.original_max_position_embeddings = get_or<int64_t>(s, "original_max_position_embeddings", 0);
    r.beta_fast = get_or<double>(s, "beta_fast", 0.0);
    r.beta_slow = get_or<double>(s, "beta_slow", 0.0);
    if (r.beta_fast == 0) r.beta_fast = 32.0;  // transformers treats 0 / null as unset
    if (r.beta_slow == 0) r.beta_slow = 1.0;
    r.mscale = get_or<double>(s, "mscale", 0.0);
    r.mscale_all_dim = get_or<double>(s, "mscale_all_dim", 0.0);
    r.attention_factor = get_or<double>(s, "attention_factor", 0.0);
    r.truncate = get_or<bool>(s, "truncate", true);
  }
  if (r.type != "default" && r.type != "linear" && r.type != "llama3" && r.type != "yarn")
    fail(VT_ERR_UNSUPPORTED_ARCH, "rope scaling type `" + r.type + "` is not supported (supported: linear, llama3, yarn)");
  if (r.type == "linear" || r.type == "llama3") {
    if (!(r.factor > 0)) fail(VT_ERR_BAD_CHECKPOINT, "config.json: rope scaling `" + r.type + "` needs a positive factor");
  }
  if (r.theta <= 0 || r.factor < 0) fail(VT_ERR_BAD_CHECKPOINT, "config.json: rope theta and factor must be positive");
}

}  // namespace

ModelConfig load_model_config(const std::string &dir) {
  const fs::path root(dir);
  json cfg = read_json(root / "config.json", true);
  ModelConfig c;
  std::string arch;
  if (cfg.contains("architectures") && cfg["architectures"].is_array() && !cfg["architectures"].empty() &&
      cfg["architectures"][0].is_string())
    arch = cfg["architectures"][0].get<std::string>();
  if (arch.empty()) fail(VT_ERR_BAD_CHECKPOINT, "config.json has no `architectures` entry");
  c.architecture = arch;
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM") c.family = Family::Llama;
  else if (arch == "Qwen2ForCausalLM") c.family = Family::Qwen2;
  else if (arch == "Qwen3ForCausalLM") c.family = Family::Qwen3;
  else
    fail(VT_ERR_UNSUPPORTED_ARCH, "architecture `" + arch +
                                      "` is not supported (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");

  c.vocab_size = require_positive(cfg, "vocab_size");
  c.hidden_size = require_positive(cfg, "hidden_size");
  c.intermediate_size = require_positive(cfg, "intermediate_size");
  c.n_layers = require_positive(cfg, "num_hidden_layers");
  c.n_heads = require_positive(cfg, "num_attention_heads");
  c.n_kv_heads = cfg.contains("num_key_value_heads") && !cfg["num_key_value_heads"].is_null()
                     ? require_positive(cfg, "num_key_value_heads")
                     : c.n_heads;
  c.head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null() ? require_positive(cfg, "head_dim")
                                                                      : c.hidden_size / c.n_heads;
  if (c.n_heads % c.n_kv_heads != 0)
    fail(VT_ERR_BAD_CHECKPOINT, "config.json: num_attention_heads must be a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) fail(VT_ERR_BAD_CHECKPOINT, "config.json: head_dim must be even for rotary embeddings");
  c.max_position_embeddings = require_positive(cfg, "max_position_embeddings");
  c.rms_norm_eps = float(get_or<double>(cfg, "rms_norm_eps", 1e-6));
  c.tie_word_embeddings = get_or<bool>(cfg, "tie_word_embeddings", false);
  c.qk_norm = c.family == Family::Qwen3;
  c.torch_dtype = get_or<std::string>(cfg, "torch_dtype", get_or<std::string>(cfg, "dtype", ""));
  read_rope(cfg, c.rope);

  c.bos_token_id = cfg.contains("bos_token_id") && cfg["bos_token_id"].is_number_integer() ? cfg["bos_token_id"].get<int32_t>() : -1;
  if (cfg.contains("eos_token_id")) c.eos_token_ids = id_list(cfg["eos_token_id"]);
  json gen = read_json(root / "generation_config.json", false);
  if (gen.contains("eos_token_id")) {
    auto ids = id_list(gen["eos_token_id"]);
    if (!ids.empty()) c.eos_token_ids = ids;  // generation_config.json wins, as in transformers
  }
  if (gen.contains("bos_token_id") && gen["bos_token_id"].is_number_integer()) c.bos_token_id = gen["bos_token_id"].get<int32_t>();
  return c;
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
  inv_freq_out->assign(inv.begin(), inv.end());
  *attn_scale = float(scale);
}

}  // namespace vt
