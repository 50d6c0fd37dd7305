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
  const char *model_type;  // config.json's model_type (a composite config's, where the text fields nest)
  Family family;
  // The model over `ops`, bound to `w` (which must outlive it).
  std::unique_ptr<Model> (*make)(const ModelConfig &c, const Weights &w, ModelOps &ops);
  // The model's weight schema for a config (models/weight_schema.h): what bind_weights binds and, through
  // shape_weights, what sizing reads before a checkpoint is.
  WeightSchema (*schema)(const ModelConfig &c);
  // What each layer keeps per sequence between steps (K/V, a state slot): what sizes the KV pool and the slots.
  StateLayout (*state_layout)(const ModelConfig &c);
  // Qwen3.5's classes: the model_type of a config whose text fields sit at the top level (a text-only ForCausalLM
  // export); null: the family has no composite config (the text fields are always at the top).
  const char *text_model_type = nullptr;
  // transformers builds a vision tower beside the text model (a ConditionalGeneration).
  bool vision_tower = false;
  const char *name = nullptr;  // the models, for messages: "Qwen3.5 / Qwen3.6"

  // A row without a model: an architecture the loader reads and checks but no model runs yet (refused as such,
  // never as unknown). When its model lands, the row gets its functions.
  bool supported() const { return make != nullptr; }
  bool composite() const { return text_model_type != nullptr; }
};

// The row for an architecture, supported or not (ModelEntry::supported); null when the engine has none.
const ModelEntry *find_model(std::string_view architecture);
// The supported row for a parsed config; throws ERR_UNSUPPORTED_ARCH otherwise (pending_refusal for a row without
// a model).
const ModelEntry &model_entry(const ModelConfig &c);
// "LlamaForCausalLM, MistralForCausalLM, ...": the supported ones, for messages.
std::string supported_architectures();
// "architecture `X` (Qwen3.5 / Qwen3.6 MoE) is recognised but not supported yet ...": the refusal, one wording for
// every path that meets such a config.
std::string pending_refusal(const ModelEntry &p);


}  // namespace vt
