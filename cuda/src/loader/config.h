// What config.json and generation_config.json say about a dense decoder, in our own words.
// Both spellings of the rotary settings are read: the Hub's classic top-level `rope_theta` + `rope_scaling`,
// and transformers 5's `rope_parameters`. Every field is read as the type transformers reads it (a wrong type is
// ERR_BAD_CHECKPOINT naming it), and every field that changes the model's arithmetic is checked against what the
// engine computes (loader/config_arithmetic.h): nothing becomes a silent default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vt {

enum class Family { Llama, Qwen2, Qwen3 };

struct RopeConfig {
  std::string type = "default";  // default | linear | llama3 | yarn
  double theta = 10000.0;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;  // 0 = absent
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 = absent
  double mscale_all_dim = 0.0;  // 0 = absent
  double attention_factor = 0.0;  // 0 = derive
  bool truncate = true;
};

struct ModelConfig {
  std::string architecture;
  std::string model_type;  // empty when config.json has none
  Family family = Family::Llama;
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  bool qk_norm = false;  // Qwen3: RMSNorm over each head of q and k before RoPE
  // Which projections carry a bias, as transformers builds each family: Qwen2 q/k/v always (o never); Llama and
  // Qwen3 q/k/v/o when attention_bias; Llama's MLP when mlp_bias; Mistral none. The tensors must match exactly.
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  RopeConfig rope;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
  std::string torch_dtype;
};

// Reads <dir>/config.json (required) and <dir>/generation_config.json (optional). Throws vt::Error.
ModelConfig load_model_config(const std::string &dir);

// The same from the files' text (generation_json nullopt: no generation_config.json): a pure function, fuzzed.
ModelConfig parse_model_config(std::string_view config_json, std::optional<std::string_view> generation_json);

// RoPE inverse frequencies (head_dim / 2) with the configured scaling, and the factor cos/sin are multiplied by
// (YaRN's attention factor; 1 otherwise). Computed as transformers' modeling_rope_utils does.
void rope_tables(const ModelConfig &c, std::vector<float> *inv_freq, float *attn_scale);

}  // namespace vt
