// The architectures the engine runs, one row each: config.json's architectures[0], the model_type transformers
// pairs with it, its family (how loader/config.cpp reads the rest of the config), and the model that runs it.
// Supporting an architecture is a row here, plus a model file when its network is new (models/dense_model.h is
// Llama's, Mistral's, Qwen2's and Qwen3's).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "loader/config.h"
#include "loader/weights.h"
#include "models/model.h"
#include "models/state_layout.h"

namespace vt {

struct ModelEntry {
  const char *architecture;
  const char *model_type;
  Family family;
  // The model over `ops`, bound to `w` (which must outlive it).
  std::unique_ptr<Model> (*make)(const ModelConfig &c, const Weights &w, ModelOps &ops);
  // The weight schema's shapes for a config, no data: what sizing needs before a checkpoint is read.
  Weights (*weight_shapes)(const ModelConfig &c);
  // What each layer keeps per sequence between steps (K/V, a state slot): what sizes the KV pool and the slots.
  StateLayout (*state_layout)(const ModelConfig &c);
};

// The row for an architecture; null when the engine has none.
const ModelEntry *find_model(std::string_view architecture);
// The row for a parsed config (whose architecture parse_model_config checked).
const ModelEntry &model_entry(const ModelConfig &c);
// "LlamaForCausalLM, MistralForCausalLM, ...": for messages.
std::string supported_architectures();

}  // namespace vt
