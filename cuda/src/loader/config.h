// What config.json and generation_config.json say about a decoder, in our own words: the dense families, and the
// hybrid Qwen3.5 / Qwen3.6 (transformers' qwen3_5 and qwen3_5_moe), whose layers are Gated DeltaNet linear attention
// interleaved with gated full attention, read ahead of their model (issue 31).
// Both spellings of the rotary settings are read: the Hub's classic top-level `rope_theta` + `rope_scaling`,
// and transformers 5's `rope_parameters`. Every field is read as the type transformers reads it (a wrong type is
// ERR_BAD_CHECKPOINT naming it), and every field that changes the model's arithmetic is checked against what the
// engine computes (loader/config_arithmetic.h): nothing becomes a silent default.
//
// A ConditionalGeneration checkpoint (a vision tower beside the text model) nests the text model's fields under
// `text_config`; they are read from there, and the fields transformers reads from the top-level config
// (`tie_word_embeddings`, `quantization_config`, the dtype, `vision_config`) from the top.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vt {

enum class Family { Llama, Qwen2, Qwen3, Qwen3_5, Qwen3_5Moe };

// What mixes a layer's tokens (transformers' layer_types).
enum class LayerKind : uint8_t {
  Attention,        // "full_attention": causal softmax attention over every earlier token's K/V
  LinearAttention,  // "linear_attention": a Gated DeltaNet layer, a fixed-size recurrent state per sequence
};

// The Gated DeltaNet layers' geometry (transformers' linear_* fields), named as cpu::GdnGeometry names it.
struct GdnConfig {
  int32_t n_k_heads = 0;    // linear_num_key_heads: q and k heads
  int32_t n_v_heads = 0;    // linear_num_value_heads, a multiple of n_k_heads: key head kh serves Hv/Hk of them
  int32_t k_dim = 0;        // linear_key_head_dim
  int32_t v_dim = 0;        // linear_value_head_dim
  int32_t conv_kernel = 0;  // linear_conv_kernel_dim: the causal depthwise conv's width over q|k|v
};

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
  int32_t intermediate_size = 0;  // the dense MLP's width; 0 for Qwen3.5 MoE, which has none
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
  // What mixes each layer's tokens, n_layers entries: all Attention for the dense families.
  std::vector<LayerKind> layer_kinds;
  // RoPE rotates the first rotary_dims of each q/k head (NeoX halves: rotate_half over those dims) and passes the
  // rest through: head_dim, except Qwen3.5's head_dim x partial_rotary_factor (256 x 0.25 = 64). rope_tables computes
  // rotary_dims / 2 frequencies.
  int32_t rotary_dims = 0;
  // Qwen3.5's attention output gate: q_proj gives, per head, [q | gate] (2 x head_dim rows), and the attention
  // output is multiplied by sigmoid(gate) before o_proj.
  bool attn_output_gate = false;
  GdnConfig gdn;  // zero for the dense families
  // transformers' model has a vision tower beside the text model (a ConditionalGeneration, or a vision_config):
  // its weights (model.visual.*) are no part of the text model, for the engine to list as skipped.
  bool vision_tower = false;
  // Multi-token-prediction layers the checkpoint carries (mtp_num_hidden_layers; their weights mtp.*): transformers
  // skips them when it loads the model, and so does the engine (they serve speculative decoding).
  int32_t mtp_layers = 0;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
  std::string torch_dtype;
};

// Reads <dir>/config.json (required) and <dir>/generation_config.json (optional). Throws vt::Error.
ModelConfig load_model_config(const std::string &dir);

// The same from the files' text (generation_json nullopt: no generation_config.json): a pure function, fuzzed.
// An architecture the loader recognises but no model runs yet (models/registry.h's pending rows) is read and
// checked in full, then refused with ERR_UNSUPPORTED_ARCH saying so.
ModelConfig parse_model_config(std::string_view config_json, std::optional<std::string_view> generation_json);

// parse_model_config without that last refusal: what a recognised architecture's config says, whether or not its
// model has landed (tests, and tools that describe a checkpoint the engine cannot run yet).
ModelConfig parse_recognised_config(std::string_view config_json, std::optional<std::string_view> generation_json);

// RoPE inverse frequencies (head_dim / 2) with the configured scaling, and the factor cos/sin are multiplied by
// (YaRN's attention factor; 1 otherwise). Computed as transformers' modeling_rope_utils does.
void rope_tables(const ModelConfig &c, std::vector<float> *inv_freq, float *attn_scale);
// The same over `dims` rotary dims (an attention kind's: models/model_ops.h AttentionGeometry::rotary_dims).
void rope_tables(const ModelConfig &c, int32_t dims, std::vector<float> *inv_freq, float *attn_scale);

}  // namespace vt
