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

}  // namespace

int main() {
  test_accepted();
  test_types();
  test_rules();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
