// config.json's fields that change what the model computes, checked against what the engine implements: a dense
// decoder with RMSNorm, full causal attention (GQA, optional q/k RMSNorm), RoPE over the whole head (default,
// linear, llama3 or yarn), a SiLU-gated MLP, and bf16/f16/f32 weights. The engine must never compute something
// else than the checkpoint asks for without a word. The hybrid Qwen3.5 / 3.6 configs, read ahead of their model, get
// the same checks where they apply, plus their own (check_hybrid: one model described, whole geometry).
//
// Codes: a value the engine does not implement is ERR_UNSUPPORTED_ARCH (a quantized checkpoint
// ERR_UNSUPPORTED_DTYPE); a value no model can have, or fields that contradict each other, ERR_BAD_CHECKPOINT. Each
// message names the field and its value.
//
// A field that transformers does not read for the declared architecture is left alone (transformers, the reference,
// ignores it too), except where its presence can only mean a model trained with other arithmetic — logit
// softcapping, a sliding window on a Llama — which would otherwise be computed wrongly past some length.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "loader/config.h"

namespace vt {

// `cfg` is config.json; `text` the object the text model's fields were read from (cfg itself, or its text_config
// where a ConditionalGeneration nests them), `where` how messages name that object ("config.json" or
// "config.json: text_config"); `c` what parse_model_config has read so far (architecture, sizes, RoPE, layers).
void check_config_arithmetic(const nlohmann::json &cfg, const nlohmann::json &text, const std::string &where,
                             const ModelConfig &c);

}  // namespace vt
