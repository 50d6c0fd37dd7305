// parse_model_config and its arithmetic checks (loader/config_arithmetic.h): each rule refuses a one-field edit of
// a good config with its code and a message naming the field, and the spellings real checkpoints use still load.
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "loader/config.h"
#include "models/registry.h"
#include "status.h"

using nlohmann::json;

namespace {

// A Qwen3 config as transformers 4 writes it (the classic form), small.
json qwen3() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false, "bos_token_id": 1,
    "eos_token_id": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 160,
    "layer_types": ["full_attention", "full_attention"], "max_position_embeddings": 1024, "max_window_layers": 28,
    "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "rope_scaling": null, "sliding_window": null, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "use_sliding_window": false, "vocab_size": 384})");
}

json llama() {
  json j = qwen3();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  for (const char *k : {"layer_types", "max_window_layers", "sliding_window", "use_sliding_window"}) j.erase(k);
  return j;
}

// transformers' default layer_types for an interval: interval - 1 linear attention layers, then a full one.
json layer_types(int n_layers, int interval) {
  json t = json::array();
  for (int i = 0; i < n_layers; ++i) t.push_back((i + 1) % interval ? "linear_attention" : "full_attention");
  return t;
}

// A Qwen3.5-27B config.json in the shape Qwen publishes (Qwen3_5ForConditionalGeneration: the text model's fields
// under text_config, a vision tower beside it; Qwen's extra fields attn_output_gate, mtp_*, mamba_ssm_dtype too),
// written from transformers' Qwen3_5Config / Qwen3_5TextConfig fields with the 27B's sizes: hidden 5120, 64 layers
// (three Gated DeltaNet, then one attention layer), 24 q / 4 kv heads of 256, RoPE on a quarter of each head
// (theta 1e7), GDN 16 key / 48 value heads of 128, conv 4, vocab 248,320.
json qwen35_27b() {
  json j = json::parse(R"({
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "image_token_id": 248056,
    "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
    "tie_word_embeddings": false, "transformers_version": "4.57.0.dev0",
    "text_config": {
      "model_type": "qwen3_5_text", "attention_bias": false, "attention_dropout": 0.0, "attn_output_gate": true,
      "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
      "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 17408, "linear_conv_kernel_dim": 4,
      "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_value_head_dim": 128,
      "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "mlp_only_layers": [], "mtp_num_hidden_layers": 1,
      "mtp_use_dedicated_embeddings": false, "num_attention_heads": 24, "num_hidden_layers": 64, "num_key_value_heads": 4,
      "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "use_cache": true, "vocab_size": 248320,
      "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10], "rope_type": "default",
                          "rope_theta": 10000000, "partial_rotary_factor": 0.25}
    },
    "vision_config": {
      "model_type": "qwen3_5", "deepstack_visual_indexes": [], "depth": 27, "hidden_act": "gelu_pytorch_tanh",
      "hidden_size": 1152, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "num_heads": 16,
      "num_position_embeddings": 2304, "out_hidden_size": 5120, "patch_size": 16, "spatial_merge_size": 2,
      "temporal_patch_size": 2
    }})");
  j["text_config"]["layer_types"] = layer_types(64, 4);
  return j;
}

// Qwen3.5-9B: transformers' Qwen3_5TextConfig defaults, which its docstring presents as the 9B (hidden 4096, 32
// layers, 16 q / 4 kv heads, GDN 16 key / 32 value heads, MLP 12288), with the released models' RoPE and context.
json qwen35_9b() {
  json j = qwen35_27b();
  json &t = j["text_config"];
  t["hidden_size"] = 4096, t["intermediate_size"] = 12288, t["num_hidden_layers"] = 32, t["num_attention_heads"] = 16;
  t["linear_num_value_heads"] = 32, t["layer_types"] = layer_types(32, 4);
  j["vision_config"]["out_hidden_size"] = 4096;
  return j;
}

// A text-only export: Qwen3_5ForCausalLM with the text config at the top level (transformers' Qwen3_5TextConfig
// as it saves itself: model_type qwen3_5_text, no vision_config).
json qwen35_flat() {
  json j = qwen35_27b()["text_config"];
  j["architectures"] = {"Qwen3_5ForCausalLM"};
  return j;
}

// Qwen3.5-35B-A3B (Qwen3_5MoeForConditionalGeneration): hidden 2048, 40 layers, 16 q / 2 kv heads, GDN 16 / 32 heads,
// 256 experts of 512 (8 a token) and a shared expert of 512; no dense MLP, so no intermediate_size.
json qwen35_moe() {
  json j = qwen35_27b();
  j["architectures"] = {"Qwen3_5MoeForConditionalGeneration"};
  j["model_type"] = "qwen3_5_moe";
  json &t = j["text_config"];
  t.erase("intermediate_size");
  t["model_type"] = "qwen3_5_moe_text", t["hidden_size"] = 2048, t["num_hidden_layers"] = 40, t["num_attention_heads"] = 16;
  t["num_key_value_heads"] = 2, t["linear_num_value_heads"] = 32, t["layer_types"] = layer_types(40, 4);
  t["num_experts"] = 256, t["num_experts_per_tok"] = 8, t["moe_intermediate_size"] = 512;
  t["shared_expert_intermediate_size"] = 512;
  j["vision_config"]["out_hidden_size"] = 2048;
  return j;
}

struct Outcome {
  bool ok = false;
  vt_status status = VT_OK;
  std::string message;
  vt::ModelConfig config;
};

Outcome parse(const std::string &config, std::optional<std::string> generation = std::nullopt) {
  Outcome o;
  try {
    o.config = generation ? vt::parse_model_config(config, std::string_view(*generation)) : vt::parse_model_config(config, std::nullopt);
    o.ok = true;
  } catch (const vt::Error &e) {
    o.status = e.status();
    o.message = e.what();
  }
  return o;
}

Outcome edited(json base, const std::function<void(json &)> &edit) {
  edit(base);
  return parse(base.dump());
}

// parse_recognised_config: what a config says whether or not its model has landed (parse_model_config refuses
// Qwen3.5's after reading it all).
Outcome recognised(const json &config, std::optional<std::string> generation = std::nullopt) {
  Outcome o;
  try {
    o.config = vt::parse_recognised_config(config.dump(), generation ? std::optional<std::string_view>(*generation) : std::nullopt);
    o.ok = true;
  } catch (const vt::Error &e) {
    o.status = e.status();
    o.message = e.what();
  }
  return o;
}

Outcome recognised_edit(json base, const std::function<void(json &)> &edit) {
  edit(base);
  return recognised(base);
}

void refused(const std::string &what, const Outcome &o, vt_status status, const std::vector<std::string> &words) {
  bool good = !o.ok && o.status == status;
  for (const auto &w : words) good = good && o.message.find(w) != std::string::npos;
  record(good, what, o.ok ? "accepted" : "status " + std::to_string(o.status) + ": " + o.message);
}

void accepted(const std::string &what, const Outcome &o) { record(o.ok, what, o.message); }

const vt_status BAD = VT_ERR_BAD_CHECKPOINT, ARCH = VT_ERR_UNSUPPORTED_ARCH;

void test_accepted() {
  Outcome o = parse(qwen3().dump());
  accepted("the Qwen3 config", o);
  CHECK(o.ok && o.config.family == vt::Family::Qwen3 && o.config.qk_norm && !o.config.qkv_bias && !o.config.o_bias);
  CHECK(o.ok && o.config.head_dim == 16 && o.config.n_kv_heads == 2 && std::fabs(o.config.rope.theta - 1e6) < 1e-3);
  CHECK(o.ok && o.config.eos_token_ids == std::vector<int32_t>({2}) && o.config.bos_token_id == 1);
  o = edited(qwen3(), [](json &j) {
    j.erase("rope_theta");
    j.erase("rope_scaling");
    j.erase("torch_dtype");
    j["dtype"] = "bfloat16";
    j["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "default"}};
  });
  accepted("the transformers 5 form (rope_parameters)", o);
  CHECK(o.ok && o.config.torch_dtype == "bfloat16");
  accepted("hidden_act swish", edited(qwen3(), [](json &j) { j["hidden_act"] = "swish"; }));
  accepted("no hidden_act (transformers' default: silu)", edited(qwen3(), [](json &j) { j.erase("hidden_act"); }));
  accepted("no model_type", edited(qwen3(), [](json &j) { j.erase("model_type"); }));
  accepted("rope_scaling with \"type\"", edited(llama(), [](json &j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; }));
  accepted("llama3 rope", edited(llama(), [](json &j) {
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 128}};
  }));
  accepted("yarn rope", edited(qwen3(), [](json &j) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 256}};
  }));
  accepted("partial_rotary_factor 1.0", edited(qwen3(), [](json &j) { j["partial_rotary_factor"] = 1.0; }));
  // Real Qwen2.5 configs: a window, but not in use.
  accepted("sliding_window with use_sliding_window false", edited(qwen3(), [](json &j) { j["sliding_window"] = 4096; }));
  accepted("use_sliding_window with every layer below max_window_layers",
           edited(qwen3(), [](json &j) { j["use_sliding_window"] = true; j["sliding_window"] = 64; j.erase("layer_types"); }));
  accepted("a Mistral without sliding_window (default 4096) and a shorter context",
           edited(llama(), [](json &j) { j["architectures"] = {"MistralForCausalLM"}; j["model_type"] = "mistral"; }));
  accepted("a Llama window as long as the context", edited(llama(), [](json &j) { j["sliding_window"] = 1024; }));
  accepted("softcapping null", edited(qwen3(), [](json &j) { j["final_logit_softcapping"] = nullptr; }));
  accepted("quantization_config null", edited(qwen3(), [](json &j) { j["quantization_config"] = nullptr; }));
  o = edited(llama(), [](json &j) { j["attention_bias"] = true; j["mlp_bias"] = true; });
  accepted("Llama with attention_bias and mlp_bias", o);
  CHECK(o.ok && o.config.qkv_bias && o.config.o_bias && o.config.mlp_bias);
  o = edited(qwen3(), [](json &j) { j["architectures"] = {"Qwen2ForCausalLM"}; j["model_type"] = "qwen2"; j["attention_bias"] = true; });
  accepted("Qwen2 (attention_bias not read)", o);
  CHECK(o.ok && o.config.qkv_bias && !o.config.o_bias && !o.config.mlp_bias && !o.config.qk_norm);
  o = parse(qwen3().dump(), R"({"eos_token_id": [5, 6], "bos_token_id": 7})");
  accepted("generation_config.json's ids win", o);
  CHECK(o.ok && o.config.eos_token_ids == std::vector<int32_t>({5, 6}) && o.config.bos_token_id == 7);
}

void test_types() {
  refused("a fractional size", edited(qwen3(), [](json &j) { j["hidden_size"] = 64.5; }), BAD, {"hidden_size", "64.5"});
  refused("a size of 64.0", edited(qwen3(), [](json &j) { j["hidden_size"] = 64.0; }), BAD, {"hidden_size", "integer"});
  refused("a size as a string", edited(qwen3(), [](json &j) { j["vocab_size"] = "384"; }), BAD, {"vocab_size"});
  refused("a size true", edited(qwen3(), [](json &j) { j["num_hidden_layers"] = true; }), BAD, {"num_hidden_layers"});
  refused("a negative size", edited(qwen3(), [](json &j) { j["intermediate_size"] = -160; }), BAD, {"intermediate_size", "-160"});
  refused("a zero size", edited(qwen3(), [](json &j) { j["num_attention_heads"] = 0; }), BAD, {"num_attention_heads"});
  refused("a size over 2^30", edited(qwen3(), [](json &j) { j["vocab_size"] = int64_t(1) << 31; }), BAD, {"vocab_size"});
  refused("a size over int64", edited(qwen3(), [](json &j) { j["vocab_size"] = UINT64_MAX; }), BAD, {"vocab_size"});
  refused("a missing size", edited(qwen3(), [](json &j) { j.erase("max_position_embeddings"); }), BAD, {"max_position_embeddings"});
  refused("tie_word_embeddings 1", edited(qwen3(), [](json &j) { j["tie_word_embeddings"] = 1; }), BAD, {"tie_word_embeddings"});
  refused("attention_bias a string", edited(qwen3(), [](json &j) { j["attention_bias"] = "false"; }), BAD, {"attention_bias"});
  refused("rms_norm_eps a string", edited(qwen3(), [](json &j) { j["rms_norm_eps"] = "1e-6"; }), BAD, {"rms_norm_eps"});
  refused("eos_token_id a string", edited(qwen3(), [](json &j) { j["eos_token_id"] = "2"; }), BAD, {"eos_token_id"});
  refused("a negative eos id", edited(qwen3(), [](json &j) { j["eos_token_id"] = {2, -1}; }), BAD, {"eos_token_id", "-1"});
  refused("bos_token_id a list", edited(qwen3(), [](json &j) { j["bos_token_id"] = {1, 2}; }), BAD, {"bos_token_id"});
  refused("generation_config.json eos a float", parse(qwen3().dump(), R"({"eos_token_id": 2.5})"), BAD,
          {"generation_config.json", "eos_token_id"});
  refused("generation_config.json empty", parse(qwen3().dump(), ""), BAD, {"generation_config.json"});
  refused("config.json not JSON", parse("{ oops"), BAD, {"config.json", "not valid JSON"});
  refused("config.json a list", parse("[1, 2]"), BAD, {"config.json", "not a JSON object"});
  refused("config.json with a NUL and more after it", parse(qwen3().dump() + std::string(1, '\0') + "junk"), BAD, {"NUL"});
  refused("no architectures", edited(qwen3(), [](json &j) { j.erase("architectures"); }), BAD, {"architectures"});
  refused("an unknown architecture", edited(qwen3(), [](json &j) { j["architectures"] = {"GPTNeoXForCausalLM"}; }), ARCH,
          {"GPTNeoXForCausalLM"});
}

void test_rules() {
  refused("model_type of another family", edited(qwen3(), [](json &j) { j["architectures"] = {"LlamaForCausalLM"}; }), BAD,
          {"model_type", "\"qwen3\"", "LlamaForCausalLM"});
  refused("quantization_config", edited(qwen3(), [](json &j) { j["quantization_config"] = {{"quant_method", "awq"}}; }),
          VT_ERR_UNSUPPORTED_DTYPE, {"quantization_config", "awq"});
  refused("quantization_config without a method", edited(qwen3(), [](json &j) { j["quantization_config"] = json::object(); }),
          VT_ERR_UNSUPPORTED_DTYPE, {"quantization_config"});
  refused("hidden_act gelu", edited(qwen3(), [](json &j) { j["hidden_act"] = "gelu"; }), ARCH, {"hidden_act", "gelu"});
  refused("hidden_act a number", edited(qwen3(), [](json &j) { j["hidden_act"] = 1; }), BAD, {"hidden_act"});
  refused("rope_scaling a string", edited(qwen3(), [](json &j) { j["rope_scaling"] = "yarn"; }), BAD, {"rope_scaling", "object or null"});
  refused("rope_parameters a number", edited(qwen3(), [](json &j) { j["rope_parameters"] = 3; }), BAD, {"rope_parameters"});
  refused("rope type dynamic", edited(qwen3(), [](json &j) { j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}}; }),
          ARCH, {"rope_scaling.rope_type", "dynamic"});
  refused("rope type longrope (v5 form)", edited(qwen3(), [](json &j) { j["rope_parameters"] = {{"rope_type", "longrope"}}; }), ARCH,
          {"rope_parameters.rope_type", "longrope"});
  refused("per-layer-type RoPE", edited(qwen3(), [](json &j) {
    j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}, {"sliding_attention", {{"rope_type", "default"}}}};
  }), ARCH, {"rope_parameters.full_attention", "per-layer"});
  refused("rope_parameters and rope_scaling disagreeing", edited(qwen3(), [](json &j) {
    j["rope_parameters"] = {{"rope_type", "default"}};
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  }), BAD, {"rope_parameters", "rope_scaling", "disagree"});
  // Found by the checkpoint fuzzer (scripts/fuzz-checkpoints.mjs, 2000 mutants): read as "absent" before.
  refused("hidden_act null", edited(qwen3(), [](json &j) { j["hidden_act"] = nullptr; }), BAD, {"hidden_act", "null"});
  refused("rms_norm_eps null", edited(qwen3(), [](json &j) { j["rms_norm_eps"] = nullptr; }), BAD, {"rms_norm_eps", "null"});
  refused("model_type empty", edited(qwen3(), [](json &j) { j["model_type"] = ""; }), BAD, {"model_type", "empty"});
  refused("rope_scaling with a factor and no type", edited(qwen3(), [](json &j) { j["rope_scaling"] = {{"factor", 4.0}}; }), BAD,
          {"rope_scaling", "factor", "rope_type"});
  refused("yarn factor -0.0", edited(qwen3(), [](json &j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", -0.0}}; }), BAD,
          {"rope_scaling.factor", "positive"});
  refused("bos_token_id []", edited(qwen3(), [](json &j) { j["bos_token_id"] = json::array(); }), BAD, {"bos_token_id", "empty"});
  accepted("rope_parameters with rope_theta alone", edited(qwen3(), [](json &j) { j["rope_parameters"] = {{"rope_theta", 5e5}}; }));
  refused("rope_theta 1", edited(qwen3(), [](json &j) { j["rope_theta"] = 1.0; }), BAD, {"rope_theta"});
  refused("rope_theta 1e40", edited(qwen3(), [](json &j) { j["rope_theta"] = 1e40; }), BAD, {"rope_theta"});
  refused("linear rope without a factor", edited(qwen3(), [](json &j) { j["rope_scaling"] = {{"rope_type", "linear"}}; }), BAD,
          {"rope_scaling.factor"});
  refused("a tiny rope factor", edited(qwen3(), [](json &j) { j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 1e-300}}; }),
          BAD, {"rope_scaling.factor"});
  refused("llama3 with low_freq_factor = high_freq_factor", edited(llama(), [](json &j) {
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 2.0}, {"high_freq_factor", 2.0}};
  }), BAD, {"low_freq_factor", "high_freq_factor"});
  refused("yarn with a negative beta", edited(qwen3(), [](json &j) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -1.0}};
  }), BAD, {"beta_fast"});
  refused("yarn with a negative mscale", edited(qwen3(), [](json &j) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", -1.0}};
  }), BAD, {"mscale"});
  refused("partial_rotary_factor 0.5", edited(qwen3(), [](json &j) { j["partial_rotary_factor"] = 0.5; }), ARCH, {"partial_rotary_factor", "0.5"});
  refused("partial_rotary_factor in rope_parameters", edited(qwen3(), [](json &j) {
    j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
  }), ARCH, {"rope_parameters", "partial_rotary_factor"});
  refused("a sliding layer", edited(qwen3(), [](json &j) { j["layer_types"][1] = "sliding_attention"; }), ARCH,
          {"layer_types[1]", "sliding_attention"});
  refused("layer_types of the wrong length", edited(qwen3(), [](json &j) { j["layer_types"] = {"full_attention"}; }), BAD, {"layer_types"});
  refused("use_sliding_window past max_window_layers", edited(qwen3(), [](json &j) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = 64;
    j["max_window_layers"] = 1;
  }), ARCH, {"use_sliding_window", "64"});
  refused("a Mistral with its default window 4096 < the context", edited(llama(), [](json &j) {
    j["architectures"] = {"MistralForCausalLM"};
    j["model_type"] = "mistral";
    j["max_position_embeddings"] = 32768;
  }), ARCH, {"sliding_window 4096", "32768"});
  refused("a Llama with a window", edited(llama(), [](json &j) { j["sliding_window"] = 512; }), ARCH, {"sliding_window 512"});
  refused("attn_logit_softcapping", edited(qwen3(), [](json &j) { j["attn_logit_softcapping"] = 50.0; }), ARCH, {"attn_logit_softcapping"});
  refused("final_logit_softcapping", edited(llama(), [](json &j) { j["final_logit_softcapping"] = 30.0; }), ARCH, {"final_logit_softcapping"});
  refused("rms_norm_eps 0", edited(qwen3(), [](json &j) { j["rms_norm_eps"] = 0; }), BAD, {"rms_norm_eps"});
  refused("rms_norm_eps 1e-86 (0 in float32)", edited(qwen3(), [](json &j) { j["rms_norm_eps"] = 1e-86; }), BAD, {"rms_norm_eps"});
  refused("rms_norm_eps 2", edited(qwen3(), [](json &j) { j["rms_norm_eps"] = 2; }), BAD, {"rms_norm_eps"});
  refused("heads not dividing hidden_size, no head_dim", edited(qwen3(), [](json &j) {
    j.erase("head_dim");
    j["num_attention_heads"] = 3;
    j["num_key_value_heads"] = 3;
  }), BAD, {"hidden_size", "num_attention_heads"});
  refused("an odd head_dim", edited(qwen3(), [](json &j) { j["head_dim"] = 15; }), BAD, {"head_dim"});
  refused("kv heads not dividing heads", edited(qwen3(), [](json &j) { j["num_key_value_heads"] = 3; }), BAD, {"num_key_value_heads"});
}

using vt::LayerKind;

int count_kind(const vt::ModelConfig &c, LayerKind k) {
  int n = 0;
  for (LayerKind x : c.layer_kinds) n += x == k;
  return n;
}

// Three Gated DeltaNet layers, then one attention layer, over n layers.
bool every_fourth_attention(const vt::ModelConfig &c) {
  bool ok = int(c.layer_kinds.size()) == c.n_layers;
  for (size_t i = 0; ok && i < c.layer_kinds.size(); ++i)
    ok = c.layer_kinds[i] == ((i + 1) % 4 ? LayerKind::LinearAttention : LayerKind::Attention);
  return ok;
}

// The dense families keep their meaning; the new fields describe them as whole-head RoPE, attention everywhere.
void test_dense_new_fields() {
  for (const json &j : {qwen3(), llama()}) {
    const Outcome o = parse(j.dump());
    accepted("the dense config's new fields", o);
    const auto &c = o.config;
    CHECK(o.ok && c.rotary_dims == c.head_dim && !c.attn_output_gate && !c.vision_tower && c.mtp_layers == 0);
    CHECK(o.ok && int(c.layer_kinds.size()) == c.n_layers && count_kind(c, LayerKind::Attention) == c.n_layers);
    CHECK(o.ok && c.gdn.n_k_heads == 0 && c.gdn.n_v_heads == 0 && c.gdn.conv_kernel == 0);
  }
  // An unknown architecture is still refused as unknown, not as recognised.
  const Outcome o = edited(qwen3(), [](json &j) { j["architectures"] = {"Qwen3NextForCausalLM"}; });
  refused("an unknown architecture (not \"recognised\")", o, ARCH, {"Qwen3NextForCausalLM", "is not supported"});
  CHECK(o.message.find("recognised") == std::string::npos);
}

void test_qwen35_read() {
  Outcome o = recognised(qwen35_27b());
  accepted("Qwen3.5-27B (ConditionalGeneration)", o);
  const vt::ModelConfig &c = o.config;
  CHECK(o.ok && c.family == vt::Family::Qwen3_5 && c.model_type == "qwen3_5" && c.torch_dtype == "bfloat16");
  CHECK(o.ok && c.vocab_size == 248320 && c.hidden_size == 5120 && c.intermediate_size == 17408 && c.n_layers == 64);
  CHECK(o.ok && c.n_heads == 24 && c.n_kv_heads == 4 && c.head_dim == 256 && c.max_position_embeddings == 262144);
  CHECK(o.ok && c.rotary_dims == 64 && c.rope.type == "default" && c.rope.theta == 1e7 && c.rms_norm_eps == 1e-6f);
  CHECK(o.ok && every_fourth_attention(c) && count_kind(c, LayerKind::Attention) == 16);
  CHECK(o.ok && c.attn_output_gate && c.qk_norm && !c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.tie_word_embeddings);
  CHECK(o.ok && c.gdn.n_k_heads == 16 && c.gdn.n_v_heads == 48 && c.gdn.k_dim == 128 && c.gdn.v_dim == 128 &&
        c.gdn.conv_kernel == 4);
  CHECK(o.ok && c.vision_tower && c.mtp_layers == 1);
  CHECK(o.ok && c.eos_token_ids == std::vector<int32_t>({248044}) && c.bos_token_id == -1);  // text_config's
  o = recognised(qwen35_27b(), R"({"eos_token_id": [248046, 248044], "bos_token_id": 248045})");
  CHECK(o.ok && o.config.eos_token_ids == std::vector<int32_t>({248046, 248044}) && o.config.bos_token_id == 248045);

  o = recognised(qwen35_9b());
  accepted("Qwen3.5-9B (transformers' defaults)", o);
  CHECK(o.ok && o.config.hidden_size == 4096 && o.config.n_layers == 32 && o.config.n_heads == 16 && o.config.n_kv_heads == 4);
  CHECK(o.ok && o.config.gdn.n_v_heads == 32 && every_fourth_attention(o.config) && o.config.rotary_dims == 64);

  o = recognised(qwen35_flat());
  accepted("Qwen3_5ForCausalLM, flat", o);
  CHECK(o.ok && o.config.model_type == "qwen3_5_text" && !o.config.vision_tower && o.config.hidden_size == 5120);
  CHECK(o.ok && every_fourth_attention(o.config) && o.config.gdn.n_v_heads == 48 && o.config.eos_token_ids.size() == 1);
  o = recognised_edit(qwen35_flat(), [](json &j) { j["tie_word_embeddings"] = true; });
  CHECK(o.ok && o.config.tie_word_embeddings);
  o = recognised_edit(qwen35_27b(), [](json &j) {
    j["architectures"] = {"Qwen3_5ForCausalLM"};
    j["text_config"]["tie_word_embeddings"] = true;
    j.erase("tie_word_embeddings");
  });
  accepted("Qwen3_5ForCausalLM with text_config (ties by text_config's flag)", o);
  CHECK(o.ok && o.config.tie_word_embeddings && o.config.vision_tower);  // its vision_config: weights to skip

  o = recognised(qwen35_moe());
  accepted("Qwen3.5-35B-A3B (MoE ConditionalGeneration)", o);
  CHECK(o.ok && o.config.family == vt::Family::Qwen3_5Moe && o.config.intermediate_size == 0 && o.config.n_kv_heads == 2);
  CHECK(o.ok && o.config.n_layers == 40 && count_kind(o.config, LayerKind::Attention) == 10 && o.config.gdn.n_v_heads == 32);
  o = recognised_edit(qwen35_moe(), [](json &j) { j["text_config"].erase("num_key_value_heads"); });
  CHECK(o.ok && o.config.n_kv_heads == 2);  // Qwen3_5MoeTextConfig's default

  // Defaults and the other spellings transformers accepts.
  o = recognised_edit(qwen35_27b(), [](json &j) {
    json &t = j["text_config"];
    for (const char *k : {"layer_types", "full_attention_interval", "head_dim", "num_key_value_heads", "attn_output_gate",
                          "linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads", "linear_num_value_heads",
                          "linear_value_head_dim", "mtp_num_hidden_layers"})
      t.erase(k);
    t["rope_parameters"].erase("partial_rotary_factor");
    j.erase("vision_config");
  });
  accepted("Qwen3.5 with every defaulted field left out", o);
  CHECK(o.ok && every_fourth_attention(o.config) && o.config.head_dim == 256 && o.config.n_kv_heads == 4 && o.config.rotary_dims == 64);
  CHECK(o.ok && o.config.attn_output_gate && o.config.gdn.n_k_heads == 16 && o.config.gdn.n_v_heads == 32 &&
        o.config.gdn.k_dim == 128 && o.config.gdn.v_dim == 128 && o.config.gdn.conv_kernel == 4);
  CHECK(o.ok && o.config.mtp_layers == 0 && o.config.vision_tower);  // a ConditionalGeneration builds a default tower
  o = recognised_edit(qwen35_27b(), [](json &j) {
    j["text_config"].erase("layer_types");
    j["text_config"]["full_attention_interval"] = 2;
  });
  CHECK(o.ok && count_kind(o.config, LayerKind::Attention) == 32 && o.config.layer_kinds[0] == LayerKind::LinearAttention &&
        o.config.layer_kinds[1] == LayerKind::Attention);
  o = recognised_edit(qwen35_27b(), [](json &j) {
    j["text_config"]["layer_types"][0] = "mamba";
    j["text_config"]["layer_types"][3] = "attention";
  });
  accepted("layer_types' legacy spellings (mamba, attention)", o);
  CHECK(o.ok && every_fourth_attention(o.config));
  o = recognised_edit(qwen35_27b(), [](json &j) {  // as transformers 4.57-era exports spell it
    json &t = j["text_config"];
    t.erase("rope_parameters");
    t["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {11, 11, 10}}, {"mrope_interleaved", true}};
    t["rope_theta"] = 1e7;
    t["partial_rotary_factor"] = 0.25;
  });
  accepted("Qwen3.5 with rope_scaling, rope_theta and partial_rotary_factor in text_config", o);
  CHECK(o.ok && o.config.rope.theta == 1e7 && o.config.rotary_dims == 64);
  o = recognised_edit(qwen35_27b(), [](json &j) {
    j["text_config"]["rope_parameters"] = {{"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}, {"mrope_interleaved", true}};
  });
  accepted("rope_parameters naming no rope_type, with mrope keys", o);
  CHECK(o.ok && o.config.rope.type == "default" && o.config.rotary_dims == 64);
  o = recognised_edit(qwen35_27b(), [](json &j) { j["text_config"]["partial_rotary_factor"] = 0.5; });
  CHECK(o.ok && o.config.rotary_dims == 64);  // the rotary object's factor wins, as transformers 5 fills it
  o = recognised_edit(qwen35_27b(), [](json &j) {
    j["text_config"]["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 262144},
                                           {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}, {"mrope_section", {11, 11, 10}}};
    j["text_config"]["max_position_embeddings"] = 1048576;
  });
  accepted("Qwen3.5 with YaRN to 1M tokens", o);
  CHECK(o.ok && o.config.rope.type == "yarn" && o.config.rope.factor == 4.0);
  o = recognised_edit(qwen35_27b(), [](json &j) {
    j.erase("model_type");
    j["text_config"].erase("eos_token_id");
    j["eos_token_id"] = 1;
  });
  CHECK(o.ok && o.config.eos_token_ids == std::vector<int32_t>({1}));  // the top level's ids first
}

void test_qwen35_refused() {
  // The dense sizes load (their model landed); the MoE sizes are recognised and refused, saying so.
  for (const json &j : {qwen35_27b(), qwen35_9b(), qwen35_flat()}) {
    const std::string arch = j["architectures"][0];
    const Outcome o = parse(j.dump());
    accepted(arch + " parses for loading", o);
    CHECK(o.ok && vt::model_entry(o.config).supported());
  }
  refused("Qwen3_5MoeForConditionalGeneration is recognised and not supported yet", parse(qwen35_moe().dump()), ARCH,
          {"Qwen3_5MoeForConditionalGeneration", "recognised", "not supported yet", "Qwen3.5 / Qwen3.6 MoE"});
  refused("Qwen3_5MoeForCausalLM too", edited(qwen35_moe(), [](json &j) { j["architectures"] = {"Qwen3_5MoeForCausalLM"}; }), ARCH,
          {"Qwen3_5MoeForCausalLM", "recognised"});
  // Every path that meets a parsed Qwen3.5 MoE config says the same (the memory plan and the decoders ask the registry).
  const Outcome o = recognised(qwen35_moe());
  try {
    vt::model_entry(o.config);
    record(false, "model_entry refuses a recognised architecture");
  } catch (const vt::Error &e) {
    const bool ok = e.status() == ARCH && std::string(e.what()).find("recognised") != std::string::npos;
    record(ok, "model_entry refuses as recognised", e.what());
  }
  // A broken Qwen3.5 config is named as broken before the refusal.
  refused("a broken Qwen3.5 config is ERR_BAD_CHECKPOINT first",
          edited(qwen35_27b(), [](json &j) { j["text_config"]["linear_num_value_heads"] = 40; }), BAD, {"linear_num_value_heads"});
}

void test_qwen35_bad() {
  auto text = [](const std::function<void(json &)> &edit) {
    return recognised_edit(qwen35_27b(), [&](json &j) { edit(j["text_config"]); });
  };
  const std::string TC = "config.json: text_config";
  refused("ConditionalGeneration without text_config", recognised_edit(qwen35_27b(), [](json &j) { j.erase("text_config"); }), BAD,
          {"text_config", "Qwen3_5ForConditionalGeneration"});
  refused("ConditionalGeneration with its fields at the top level",
          recognised_edit(qwen35_flat(), [](json &j) { j["architectures"] = {"Qwen3_5ForConditionalGeneration"}; }), BAD, {"text_config"});
  refused("text_config a string", recognised_edit(qwen35_27b(), [](json &j) { j["text_config"] = "x"; }), BAD, {"text_config", "object"});
  refused("vision_config a list", recognised_edit(qwen35_27b(), [](json &j) { j["vision_config"] = {1}; }), BAD, {"vision_config"});
  refused("a text size missing", text([](json &t) { t.erase("hidden_size"); }), BAD, {TC, "hidden_size", "missing"});
  refused("a text size as a string", text([](json &t) { t["vocab_size"] = "248320"; }), BAD, {TC, "vocab_size"});
  refused("layer_types one short", text([](json &t) { t["layer_types"].erase(63); }), BAD, {TC, "layer_types", "63", "64"});
  refused("layer_types not a list", text([](json &t) { t["layer_types"] = "linear_attention"; }), BAD, {"layer_types", "list"});
  refused("a sliding layer in Qwen3.5", text([](json &t) { t["layer_types"][5] = "sliding_attention"; }), BAD,
          {"layer_types[5]", "sliding_attention"});
  refused("a layer type not a string", text([](json &t) { t["layer_types"][0] = 1; }), BAD, {"layer_types[0]", "string"});
  refused("full_attention_interval 0", text([](json &t) { t.erase("layer_types"); t["full_attention_interval"] = 0; }), BAD,
          {"full_attention_interval"});
  refused("value heads not a multiple of key heads", text([](json &t) { t["linear_num_value_heads"] = 40; }), BAD,
          {TC, "linear_num_value_heads 40", "linear_num_key_heads 16"});
  refused("linear_num_key_heads a string", text([](json &t) { t["linear_num_key_heads"] = "16"; }), BAD, {"linear_num_key_heads"});
  refused("linear_key_head_dim 128.0", text([](json &t) { t["linear_key_head_dim"] = 128.0; }), BAD, {"linear_key_head_dim", "integer"});
  refused("linear_value_head_dim 0", text([](json &t) { t["linear_value_head_dim"] = 0; }), BAD, {"linear_value_head_dim"});
  refused("linear_conv_kernel_dim negative", text([](json &t) { t["linear_conv_kernel_dim"] = -4; }), BAD, {"linear_conv_kernel_dim"});
  refused("partial_rotary_factor giving 76.8 dims", text([](json &t) { t["rope_parameters"]["partial_rotary_factor"] = 0.3; }), BAD,
          {"rope_parameters.partial_rotary_factor", "0.3", "76.8", "even"});
  refused("partial_rotary_factor giving 3 (odd) dims", text([](json &t) { t["rope_parameters"]["partial_rotary_factor"] = 0.01171875; }),
          BAD, {"partial_rotary_factor", "gives 3.0", "even"});
  refused("partial_rotary_factor 0", text([](json &t) { t["rope_parameters"]["partial_rotary_factor"] = 0; }), BAD,
          {"partial_rotary_factor", "(0, 1]"});
  refused("partial_rotary_factor 1.5 at the top of text_config",
          text([](json &t) { t["rope_parameters"].erase("partial_rotary_factor"); t["partial_rotary_factor"] = 1.5; }), BAD,
          {TC + ": partial_rotary_factor", "1.5"});
  refused("partial_rotary_factor a string", text([](json &t) { t["rope_parameters"]["partial_rotary_factor"] = "0.25"; }), BAD,
          {"partial_rotary_factor"});
  refused("the default partial_rotary_factor on an odd quarter", text([](json &t) {
    t["rope_parameters"].erase("partial_rotary_factor");
    t["head_dim"] = 12;
  }), BAD, {"partial_rotary_factor (absent", "head_dim 12", "gives 3.0"});  // 12 x 0.25: an odd 3
  refused("attn_output_gate false", text([](json &t) { t["attn_output_gate"] = false; }), BAD, {TC, "attn_output_gate", "vLLM"});
  refused("attn_output_gate a string", text([](json &t) { t["attn_output_gate"] = "true"; }), BAD, {"attn_output_gate"});
  refused("mtp_num_hidden_layers -1", text([](json &t) { t["mtp_num_hidden_layers"] = -1; }), BAD, {"mtp_num_hidden_layers"});
  refused("mtp_num_hidden_layers 1.5", text([](json &t) { t["mtp_num_hidden_layers"] = 1.5; }), BAD, {"mtp_num_hidden_layers"});
  refused("mrope_section a string", text([](json &t) { t["rope_parameters"]["mrope_section"] = "11,11,10"; }), BAD, {"mrope_section"});
  refused("mrope_section with a negative", text([](json &t) { t["rope_parameters"]["mrope_section"] = {11, -11, 10}; }), BAD,
          {"mrope_section"});
  refused("mrope_interleaved 1", text([](json &t) { t["rope_parameters"]["mrope_interleaved"] = 1; }), BAD, {"mrope_interleaved"});
  refused("tie_word_embeddings disagreeing between the levels",
          recognised_edit(qwen35_27b(), [](json &j) { j["tie_word_embeddings"] = true; }), BAD,
          {"tie_word_embeddings", "true at the top level", "false in text_config"});
  refused("tie_word_embeddings only in text_config, true (transformers 5 reads the top: false)",
          recognised_edit(qwen35_27b(), [](json &j) { j.erase("tie_word_embeddings"); j["text_config"]["tie_word_embeddings"] = true; }),
          BAD, {"tie_word_embeddings", "absent (false)"});
  refused("ConditionalGeneration with the text model_type",
          recognised_edit(qwen35_27b(), [](json &j) { j["model_type"] = "qwen3_5_text"; }), BAD,
          {"model_type", "\"qwen3_5_text\"", "with a text_config", "\"qwen3_5\""});
  refused("a flat ForCausalLM with the composite model_type", recognised_edit(qwen35_flat(), [](json &j) { j["model_type"] = "qwen3_5"; }),
          BAD, {"model_type", "without a text_config", "qwen3_5_text"});
  refused("a MoE architecture with the dense model_type", recognised_edit(qwen35_moe(), [](json &j) { j["model_type"] = "qwen3_5"; }),
          BAD, {"model_type", "qwen3_5_moe"});
  refused("hidden_act gelu in text_config", text([](json &t) { t["hidden_act"] = "gelu"; }), ARCH, {TC, "hidden_act"});
  refused("rms_norm_eps null in text_config", text([](json &t) { t["rms_norm_eps"] = nullptr; }), BAD, {TC, "rms_norm_eps", "null"});
  refused("rope type dynamic in text_config", text([](json &t) { t["rope_parameters"]["rope_type"] = "dynamic"; }), ARCH,
          {TC, "rope_parameters.rope_type", "dynamic"});
  refused("kv heads not dividing heads in text_config", text([](json &t) { t["num_key_value_heads"] = 5; }), BAD,
          {TC, "num_key_value_heads"});
  refused("an FP8 Qwen3.5 (quantization_config at the top level)",
          recognised_edit(qwen35_27b(), [](json &j) { j["quantization_config"] = {{"quant_method", "fp8"}}; }), VT_ERR_UNSUPPORTED_DTYPE,
          {"quantization_config", "fp8"});
}

}  // namespace

int main() {
  test_accepted();
  test_types();
  test_rules();
  test_dense_new_fields();
  test_qwen35_read();
  test_qwen35_refused();
  test_qwen35_bad();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
