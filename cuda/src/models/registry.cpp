#include "models/registry.h"

#include "models/dense_model.h"
#include "models/qwen3_5_model.h"
#include "status.h"

namespace vt {

namespace {

std::unique_ptr<Model> make_dense(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  return std::make_unique<DenseModel>(c, w, ops);
}

std::unique_ptr<Model> make_qwen3_5(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  return std::make_unique<Qwen3_5Model>(c, w, ops);
}

// transformers 5's Qwen3.5 classes (models/qwen3_5, qwen3_5_moe): the ConditionalGeneration is what Qwen publishes,
// the ForCausalLM what a text-only export declares. The MoE sizes have no model yet (issue 32).
constexpr ModelEntry kModels[] = {
    {"LlamaForCausalLM", "llama", Family::Llama, make_dense, dense_schema, StateLayout::all_attention},
    {"MistralForCausalLM", "mistral", Family::Llama, make_dense, dense_schema, StateLayout::all_attention},
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2, make_dense, dense_schema, StateLayout::all_attention},
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3, make_dense, dense_schema, StateLayout::all_attention},
    {"Qwen3_5ForConditionalGeneration", "qwen3_5", Family::Qwen3_5, make_qwen3_5, qwen3_5_schema, qwen3_5_state,
     "qwen3_5_text", true, "Qwen3.5 / Qwen3.6"},
    {"Qwen3_5ForCausalLM", "qwen3_5", Family::Qwen3_5, make_qwen3_5, qwen3_5_schema, qwen3_5_state, "qwen3_5_text",
     false, "Qwen3.5 / Qwen3.6"},
    {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", Family::Qwen3_5Moe, nullptr, nullptr, nullptr,
     "qwen3_5_moe_text", true, "Qwen3.5 / Qwen3.6 MoE"},
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe", Family::Qwen3_5Moe, nullptr, nullptr, nullptr, "qwen3_5_moe_text", false,
     "Qwen3.5 / Qwen3.6 MoE"},
};

}  // namespace

const ModelEntry *find_model(std::string_view architecture) {
  for (const ModelEntry &e : kModels)
    if (architecture == e.architecture) return &e;
  return nullptr;
}

const ModelEntry &model_entry(const ModelConfig &c) {
  const ModelEntry *e = find_model(c.architecture);
  if (!e) fail(VT_ERR_UNSUPPORTED_ARCH, "architecture `" + c.architecture + "` is not supported");
  if (!e->supported()) fail(VT_ERR_UNSUPPORTED_ARCH, pending_refusal(*e));
  return *e;
}

std::string supported_architectures() {
  std::string s;
  for (const ModelEntry &e : kModels)
    if (e.supported()) s += (s.empty() ? "" : ", ") + std::string(e.architecture);
  return s;
}

std::string pending_refusal(const ModelEntry &p) {
  return "architecture `" + std::string(p.architecture) + "` (" + (p.name ? p.name : p.architecture) +
         ") is recognised but not supported yet: this version cannot run its mixture-of-experts layers (supported: " +
         supported_architectures() + ")";
}

}  // namespace vt
