// config.json's fields that change what the model computes, checked against what the engine implements: a dense
// decoder with RMSNorm, full causal attention (GQA, optional q/k RMSNorm), RoPE over the whole head (default,
// linear, llama3 or yarn), a SiLU-gated MLP, and bf16/f16/f32 weights. The engine must never compute something
// else than the checkpoint asks for without a word.
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

#include "loader/config.h"

namespace vt {

// `cfg` is config.json; `c` what parse_model_config has read from it so far (architecture, sizes, RoPE).
void check_config_arithmetic(const nlohmann::json &cfg, const ModelConfig &c);

}  // namespace vt
