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
#include "models/weight_schema.h"

namespace vt {

struct ModelEntry {
  const char *architecture;
  const char *model_type;
  Family family;
  // The model over `ops`, bound to `w` (which must outlive it).
  std::unique_ptr<Model> (*make)(const ModelConfig &c, const Weights &w, ModelOps &ops);
  // The model's weight schema for a config (models/weight_schema.h): what bind_weights binds and, through
  // shape_weights, what sizing reads before a checkpoint is.
  WeightSchema (*schema)(const ModelConfig &c);
  // What each layer keeps per sequence between steps (K/V, a state slot): what sizes the KV pool and the slots.
  StateLayout (*state_layout)(const ModelConfig &c);
};

// The row for an architecture; null when the engine has none.
const ModelEntry *find_model(std::string_view architecture);
// The row for a parsed config (whose architecture parse_model_config checked).
const ModelEntry &model_entry(const ModelConfig &c);
// "LlamaForCausalLM, MistralForCausalLM, ...": for messages.
std::string supported_architectures();

// An architecture the loader reads but no model runs yet (Qwen3.5 / Qwen3.6 until the hybrid model of issue 31
// lands): its checkpoint is refused as recognised and not yet supported, never as unknown. When its model lands,
// its row moves to the table above.
struct PendingModel {
  const char *architecture;
  const char *model_type;       // config.json's model_type when the text model's fields sit under text_config
  const char *text_model_type;  // ... when they sit at the top level (a text-only ForCausalLM checkpoint)
  Family family;
  bool vision_tower;  // a ConditionalGeneration: transformers builds a vision tower beside the text model
  const char *name;   // the models, for messages: "Qwen3.5 / Qwen3.6"
};

// The pending row for an architecture; null when it has none.
const PendingModel *find_pending_model(std::string_view architecture);
// "architecture `X` (Qwen3.5 / Qwen3.6) is recognised but not supported yet ...": the refusal, one wording for
// every path that meets such a config.
std::string pending_refusal(const PendingModel &p);

}  // namespace vt
