#include "loader/config_arithmetic.h"

#include <cfloat>
#include <optional>
#include <string>
#include <utility>

#include "loader/json_fields.h"
#include "models/registry.h"
#include "status.h"

namespace vt {

using nlohmann::json;

namespace {

const std::string kConfig = "config.json";

// `where` names the object a field sits in: "config.json", or "config.json: text_config" for the text model's
// fields of a checkpoint that nests them.
[[noreturn]] void unsupported(const std::string &where, const std::string &what) {
  fail(VT_ERR_UNSUPPORTED_ARCH, where + ": " + what);
}
[[noreturn]] void bad(const std::string &where, const std::string &what) { fail(VT_ERR_BAD_CHECKPOINT, where + ": " + what); }

std::string num(double v) { return json(v).dump(); }  // shortest round-trip form: 1e-06, not 0.000001

// Rule: model_type agrees with architectures[0]. transformers' AutoModelForCausalLM builds the model that
// model_type names, vLLM and this engine the one architectures names: when they disagree, the references compute
// two different models from one file and neither choice of ours is right.
// A composite family (Qwen3.5) pairs each architecture with two model_types: the composite one where the
// text model's fields nest under text_config, the text one where they sit at the top (a text-only ForCausalLM).
// Crossed, transformers reads the sizes from the other place (or builds its defaults).
void check_model_type(const ModelConfig &c, bool nested) {
  if (c.model_type.empty()) return;
  std::string want, arch = c.architecture;
  const ModelEntry *e = find_model(c.architecture);
  if (!e) model_entry(c);  // refuses
  want = e->model_type;
  if (e->composite()) {
    want = nested ? e->model_type : e->text_model_type;
    arch += nested ? " with a text_config" : " without a text_config";
  }
  if (c.model_type != want)
    bad(kConfig, "model_type " + describe_json(c.model_type) + " does not match architectures[0] " + arch +
                     " (model_type \"" + want +
                     "\"): transformers would build another model from this file; correct whichever of the two is wrong");
}

// Rule: no quantization_config. Quantized weights (GPTQ, AWQ, bitsandbytes, fp8, compressed-tensors, ...) need
// dequantizing arithmetic the engine does not have yet; their packed integers read as plain weights are garbage.
void check_quantization(const json &cfg, const std::string &where) {
  const json *q = json_field(cfg, "quantization_config");
  if (!q) return;
  const json *method = json_field(*q, "quant_method");
  fail(VT_ERR_UNSUPPORTED_DTYPE, where + ": quantization_config (quant_method " + (method ? describe_json(*method) : "not given") +
                                     ") is not supported: quantized checkpoints are not implemented yet; use the model's "
                                     "bf16, f16 or f32 checkpoint");
}

// Rule: hidden_act is SiLU. The MLP computes down(silu(gate(x)) * up(x)); transformers' ACT2FN maps "silu" and
// "swish" to the same function, and every family here defaults to "silu" when the field is absent. Anything else
// (gelu, gelu_pytorch_tanh, relu, ...) would be computed as SiLU without a word.
// Rule: a field the arithmetic needs is not null. json_field() reads null as absent, which suits optional fields,
// but transformers keeps an explicit null (its config classes default only absent keys) and then fails
// (ACT2FN[None], eps None in the norm): taking our default instead would compute a model nobody else can.
void check_not_null(const json &cfg, const std::string &where) {
  for (const char *key : {"hidden_act", "rms_norm_eps", "model_type", "hidden_size", "num_hidden_layers",
                          "num_attention_heads", "intermediate_size", "vocab_size"}) {
    auto it = cfg.find(key);
    if (it != cfg.end() && it->is_null()) bad(where, std::string("`") + key + "` is null: give it a value or leave it out");
  }
  auto it = cfg.find("model_type");
  if (it != cfg.end() && it->is_string() && it->get_ref<const std::string &>().empty())
    bad(where, "`model_type` is an empty string: transformers cannot map it to a model (leave it out or name the family)");
}

void check_activation(const json &cfg, const std::string &where) {
  const auto act = json_string(cfg, "hidden_act", where);
  if (act && *act != "silu" && *act != "swish")
    unsupported(where, "hidden_act " + describe_json(*act) + " is not implemented (the MLP computes SiLU: \"silu\" or \"swish\")");
}

std::string rope_type_of(const json &o, const std::string &where) {
  if (auto t = json_string(o, "rope_type", where)) return *t;
  return json_string(o, "type", where).value_or("default");
}

// Rule: rope_scaling and rope_parameters are objects or null. transformers reads them as dicts; a string or a
// number there is a broken file, not "no scaling" (which is what skipping it would compute).
// Rule: no per-layer-type RoPE (rope_parameters {"full_attention": {...}, "sliding_attention": {...}}, as
// transformers 5 writes for models with two kinds of layer): the engine has one rotary table for every layer.
// Rule: when both are given they name the same type: transformers 5 reads rope_parameters, 4 reads rope_scaling,
// so a disagreement is two models in one file.
// Qwen3.5 (`mrope`): its object also carries mrope_section (a list of integers) and mrope_interleaved (true or
// false), which split the rotary frequencies among an image's grid axes and change nothing for text.
void check_rope_fields(const json &cfg, const std::string &where, bool mrope) {
  const json *params = json_field(cfg, "rope_parameters");
  const json *scaling = json_field(cfg, "rope_scaling");
  for (const auto &[name, v] : {std::pair{"rope_parameters", params}, std::pair{"rope_scaling", scaling}}) {
    if (!v) continue;
    if (!v->is_object()) bad(where, std::string("`") + name + "` must be an object or null, not " + describe_json(*v));
    // A scaling object that names no type ({"factor": 4}) would be read as default RoPE with its factor dropped;
    // transformers 4 fails on it (ROPE_INIT_FUNCTIONS[None]). rope_theta alone (transformers 5's form) is fine.
    const bool typed = json_field(*v, "rope_type") || json_field(*v, "type");
    const auto mrope_key = [&](const std::string &key) { return mrope && (key == "mrope_section" || key == "mrope_interleaved"); };
    for (const auto &[key, value] : v->items())
      if (!typed && !value.is_object() && key != "rope_theta" && key != "partial_rotary_factor" && !mrope_key(key))
        bad(where, std::string("`") + name + "` sets " + key + " but names no rope_type (or type): say which RoPE it is");
    if (mrope) {
      json_bool(*v, "mrope_interleaved", where + ": " + name);
      if (const json *sec = json_field(*v, "mrope_section")) {
        bool ok = sec->is_array();
        for (size_t i = 0; ok && i < sec->size(); ++i) ok = (*sec)[i].is_number_integer() && (*sec)[i].get<int64_t>() >= 0;
        if (!ok)
          bad(where, std::string("`") + name + ".mrope_section` must be a list of non-negative integers, not " + describe_json(*sec));
      }
    }
    // factor -0.0 or 0 reads as "absent" below (yarn then derives one): a factor given must be positive.
    if (const json *f = json_field(*v, "factor"); f && f->is_number() && !(f->get<double>() > 0))
      bad(where, std::string("`") + name + ".factor` " + describe_json(*f) + " must be positive");
    for (const auto &[key, value] : v->items())
      if (value.is_object())
        unsupported(where, std::string(name) + "." + key + ": per-layer-type RoPE parameters are not implemented (one "
                                                           "rotary table serves every layer)");
  }
  if (params && scaling) {
    const std::string a = rope_type_of(*params, where + ": rope_parameters"), b = rope_type_of(*scaling, where + ": rope_scaling");
    if (a != b)
      bad(where, "rope_parameters (rope_type " + describe_json(a) + ") and rope_scaling (type " + describe_json(b) +
                     ") disagree: transformers 5 would use one and transformers 4 the other; keep one of them");
  }
}

// Where the RoPE settings were read from (config.cpp's read_rope takes rope_parameters before rope_scaling), so a
// message names the field as the file spells it.
std::string rope_source(const json &cfg) {
  const json *params = json_field(cfg, "rope_parameters");
  if (params && params->is_object()) return "rope_parameters";
  const json *scaling = json_field(cfg, "rope_scaling");
  return scaling && scaling->is_object() ? "rope_scaling" : "rope_scaling (absent)";
}

// Rule: the RoPE type is one rope_tables computes (default, linear, llama3, yarn); dynamic NTK, longrope, mrope and
// the others rotate differently.
// Rule: its parameters are in range, so the table is finite: theta in (1, 1e30] (the frequencies theta^(-2i/d) must
// fall, yarn divides by log(theta), and the table is computed in float32); factors in [1e-3, 1e6]; llama3's
// high_freq_factor above its low_freq_factor (the blend divides by their difference); yarn's betas positive and its
// attention_factor and mscales not negative. transformers only warns on most of these, then computes infinities.
void check_rope_values(const json &cfg, const std::string &where, const RopeConfig &r) {
  const std::string src = rope_source(cfg);
  if (r.type != "default" && r.type != "linear" && r.type != "llama3" && r.type != "yarn")
    unsupported(where, src + ".rope_type " + describe_json(r.type) + " is not implemented (supported: default, linear, llama3, yarn)");
  if (!(r.theta > 1 && r.theta <= 1e30)) bad(where, "rope_theta " + num(r.theta) + " must be above 1 (and at most 1e30)");
  if (r.original_max_position_embeddings < 0 || r.original_max_position_embeddings > (int64_t(1) << 30))
    bad(where, src + ".original_max_position_embeddings " + std::to_string(r.original_max_position_embeddings) +
        " must be a positive integer (at most 2^30)");
  // 0 is "absent" (yarn derives it); a used factor divides frequencies up to 1, so it stays within [1e-3, 1e6].
  const bool needs_factor = r.type == "linear" || r.type == "llama3";
  if (r.type != "default" && ((needs_factor || r.factor != 0) && !(r.factor >= 1e-3 && r.factor <= 1e6)))
    bad(where, src + ".factor " + num(r.factor) + " must be between 0.001 and 1e6" +
        (needs_factor ? " (rope type " + r.type + " needs one)" : ""));
  if (r.type == "llama3" && !(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor && r.high_freq_factor <= 1e6))
    bad(where, src + ": llama3 needs 0 < low_freq_factor < high_freq_factor; got low_freq_factor " + num(r.low_freq_factor) +
        ", high_freq_factor " + num(r.high_freq_factor));
  if (r.type == "yarn") {
    if (!(r.beta_fast > 0 && r.beta_slow > 0 && r.beta_fast <= 1e6 && r.beta_slow <= 1e6))
      bad(where, src + ": yarn needs positive beta_fast and beta_slow; got " + num(r.beta_fast) + " and " + num(r.beta_slow));
    if (r.attention_factor < 0 || r.attention_factor > 1e3 || r.mscale < 0 || r.mscale > 1e3 || r.mscale_all_dim < 0 ||
        r.mscale_all_dim > 1e3)
      bad(where, src + ": yarn's attention_factor, mscale and mscale_all_dim must be in [0, 1000]; got " + num(r.attention_factor) +
          ", " + num(r.mscale) + ", " + num(r.mscale_all_dim));
  }
}

// Rule: partial_rotary_factor is 1. The engine rotates the whole head; a smaller factor rotates only its first
// part. transformers 5 reads it inside rope_parameters, 4 at the top level: both are checked.
void check_partial_rotary(const json &cfg, const std::string &where) {
  const std::pair<const json *, std::string> places[] = {{&cfg, where},
                                                         {json_field(cfg, "rope_parameters"), where + ": rope_parameters"},
                                                         {json_field(cfg, "rope_scaling"), where + ": rope_scaling"}};
  for (const auto &[obj, at] : places) {
    if (!obj) continue;
    const auto f = json_number(*obj, "partial_rotary_factor", at);
    if (f && *f != 1.0)
      fail(VT_ERR_UNSUPPORTED_ARCH, at + ": partial_rotary_factor " + num(*f) +
                                        " is not implemented (the engine applies RoPE to the whole head: 1.0)");
  }
}

// A window at least max_position_embeddings long never hides a key: the engine's context is capped there.
bool window_shorter_than_context(std::optional<int64_t> window, const ModelConfig &c) {
  return window && *window < c.max_position_embeddings;
}

// Rule: attention is full and causal on every layer.
//  - Qwen2/Qwen3: every layer_types entry is "full_attention" (transformers 5 reads it), and use_sliding_window
//    with a window shorter than the context does not put layers past max_window_layers into sliding attention
//    (transformers 4 reads that). Real Qwen configs carry a sliding_window with use_sliding_window false: fine.
//  - Mistral: sliding_window is null or no shorter than the context (MistralConfig's default, when absent, is 4096).
//  - Llama: LlamaForCausalLM ignores sliding_window, but a Llama config with a window shorter than the context is a
//    model trained with one (a relabelled Mistral); full attention would differ past the window, so it is refused.
// (Qwen3.5's layer_types name linear and full attention layers; config.cpp reads them, check_hybrid judges them.)
void check_attention_window(const json &cfg, const ModelConfig &c) {
  if (c.family == Family::Qwen3_5 || c.family == Family::Qwen3_5Moe) return;
  if (c.family == Family::Qwen2 || c.family == Family::Qwen3) {
    if (const json *types = json_field(cfg, "layer_types")) {
      if (!types->is_array() || types->size() != size_t(c.n_layers))
        bad(kConfig, "`layer_types` must be a list of num_hidden_layers (" + std::to_string(c.n_layers) + ") strings");
      for (size_t i = 0; i < types->size(); ++i) {
        const json &t = (*types)[i];
        if (!t.is_string()) bad(kConfig, "layer_types[" + std::to_string(i) + "] is " + describe_json(t) + ", not a string");
        if (t.get_ref<const std::string &>() != "full_attention")
          unsupported(kConfig, "layer_types[" + std::to_string(i) + "] is " + describe_json(t) +
                                   ": only \"full_attention\" is implemented (no sliding-window attention)");
      }
    }
    const bool use = json_bool(cfg, "use_sliding_window", kConfig).value_or(false);
    const auto window = json_integer(cfg, "sliding_window", kConfig);
    const int64_t full_layers = json_integer(cfg, "max_window_layers", kConfig).value_or(28);  // Qwen2Config's default
    if (use && window_shorter_than_context(window, c) && full_layers < c.n_layers)
      unsupported(kConfig, "use_sliding_window is true with sliding_window " + std::to_string(*window) +
                               " < max_position_embeddings " + std::to_string(c.max_position_embeddings) +
                               " for layers from max_window_layers " + std::to_string(full_layers) +
                               " on: sliding-window attention is not implemented");
    return;
  }
  std::optional<int64_t> window = json_integer(cfg, "sliding_window", kConfig);
  if (c.architecture == "MistralForCausalLM" && cfg.find("sliding_window") == cfg.end()) window = 4096;
  if (window_shorter_than_context(window, c))
    unsupported(kConfig, "sliding_window " + std::to_string(*window) + " is shorter than max_position_embeddings " +
                             std::to_string(c.max_position_embeddings) + ": sliding-window attention is not implemented");
}

// Rule: no logit softcapping (Gemma 2's tanh caps on attention scores and final logits): the engine applies none,
// and no family here reads them, so their presence means a relabelled model that needs them.
void check_softcapping(const json &cfg, const std::string &where) {
  for (const char *key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (const json *v = json_field(cfg, key))
      unsupported(where, std::string(key) + " " + describe_json(*v) + " is not implemented (the engine applies no softcapping)");
}

// Rule: RMSNorm's epsilon is a positive number below 1 that float32 holds. Every family here normalizes with
// RMSNorm (no field selects another norm); the kernels add eps in float32, where 1e-86 is 0 and divides by zero on
// a zero row, and a large eps flattens every activation.
void check_norm(const json &cfg, const std::string &where) {
  const auto eps = json_number(cfg, "rms_norm_eps", where);
  if (eps && !(*eps >= double(FLT_MIN) && *eps < 1))
    bad(where, "rms_norm_eps " + num(*eps) + " must be a positive number below 1 (and at least float32's 1.2e-38)");
}

// Rule: the head geometry is whole. Without head_dim, transformers takes hidden_size / num_attention_heads, which
// must then divide exactly; rotary halves need an even head_dim; grouped-query attention shares each kv head
// among a whole number of query heads. (Qwen3.5's head_dim defaults to 256, never to the division.)
void check_heads(const json &cfg, const std::string &where, const ModelConfig &c) {
  const bool derived = c.family != Family::Qwen3_5 && c.family != Family::Qwen3_5Moe && !json_field(cfg, "head_dim");
  if (derived && c.hidden_size % c.n_heads != 0)
    bad(where, "hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
                   std::to_string(c.n_heads) + " and head_dim is not given");
  if (c.head_dim % 2 != 0) bad(where, "head_dim " + std::to_string(c.head_dim) + " must be even for rotary embeddings");
  if (c.n_heads % c.n_kv_heads != 0)
    bad(where, "num_attention_heads " + std::to_string(c.n_heads) + " must be a multiple of num_key_value_heads " +
                   std::to_string(c.n_kv_heads));
}

// Rule (Qwen3.5 / 3.6): the hybrid layers' geometry is whole and the file describes one model.
//  - Each Gated DeltaNet key head serves a whole number of value heads (transformers repeat_interleaves q and k
//    by linear_num_value_heads / linear_num_key_heads).
//  - attn_output_gate is not false: transformers' attention always gates (q_proj gives [q | gate] per head), while
//    vLLM reads the flag and would build an ungated attention from the same file.
// (config.cpp has already refused layer_types of another length or kind, and rotary dims that are not whole and even.)
void check_hybrid(const std::string &where, const ModelConfig &c) {
  if (c.family != Family::Qwen3_5 && c.family != Family::Qwen3_5Moe) return;
  if (c.gdn.n_v_heads % c.gdn.n_k_heads != 0)
    bad(where, "linear_num_value_heads " + std::to_string(c.gdn.n_v_heads) + " must be a multiple of linear_num_key_heads " +
                   std::to_string(c.gdn.n_k_heads) + " (each key head serves a whole number of value heads)");
  if (!c.attn_output_gate)
    bad(where, "attn_output_gate is false, but transformers' Qwen3.5 attention always gates its output (q_proj gives "
               "[q | gate] per head) while vLLM would build it ungated: two models from one file");
}

}  // namespace

void check_config_arithmetic(const json &cfg, const json &text, const std::string &where, const ModelConfig &c) {
  const bool nested = &text != &cfg, hybrid = c.family == Family::Qwen3_5 || c.family == Family::Qwen3_5Moe;
  check_not_null(text, where);
  if (nested) check_not_null(cfg, kConfig);
  check_model_type(c, nested);
  check_quantization(cfg, kConfig);  // transformers reads it from the top level; one in text_config is as telling
  if (nested) check_quantization(text, where);
  check_activation(text, where);
  check_rope_fields(text, where, hybrid);
  check_rope_values(text, where, c.rope);
  if (!hybrid) check_partial_rotary(text, where);  // Qwen3.5's rotates a part: config.cpp reads it as rotary_dims
  check_attention_window(text, c);
  check_softcapping(text, where);
  check_norm(text, where);
  check_heads(text, where, c);
  check_hybrid(where, c);
}

}  // namespace vt
