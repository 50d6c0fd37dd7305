#include "models/registry.h"

#include "models/dense_model.h"
#include "status.h"

namespace vt {

namespace {

std::unique_ptr<Model> make_dense(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  return std::make_unique<DenseModel>(c, w, ops);
}

constexpr ModelEntry kModels[] = {
    {"LlamaForCausalLM", "llama", Family::Llama, make_dense, dense_schema, StateLayout::all_attention},
    {"MistralForCausalLM", "mistral", Family::Llama, make_dense, dense_schema, StateLayout::all_attention},
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2, make_dense, dense_schema, StateLayout::all_attention},
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3, make_dense, dense_schema, StateLayout::all_attention},
};

// transformers 5's classes (models/qwen3_5, qwen3_5_moe): the ConditionalGeneration is what Qwen publishes, the
// ForCausalLM what a text-only export declares.
constexpr PendingModel kPending[] = {
    {"Qwen3_5ForConditionalGeneration", "qwen3_5", "qwen3_5_text", Family::Qwen3_5, true, "Qwen3.5 / Qwen3.6"},
    {"Qwen3_5ForCausalLM", "qwen3_5", "qwen3_5_text", Family::Qwen3_5, false, "Qwen3.5 / Qwen3.6"},
    {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", "qwen3_5_moe_text", Family::Qwen3_5Moe, true,
     "Qwen3.5 / Qwen3.6 MoE"},
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe", "qwen3_5_moe_text", Family::Qwen3_5Moe, false, "Qwen3.5 / Qwen3.6 MoE"},
};

}  // namespace

const ModelEntry *find_model(std::string_view architecture) {
  for (const ModelEntry &e : kModels)
    if (architecture == e.architecture) return &e;
  return nullptr;
}

const ModelEntry &model_entry(const ModelConfig &c) {
  const ModelEntry *e = find_model(c.architecture);
  if (!e) {
    if (const PendingModel *p = find_pending_model(c.architecture)) fail(VT_ERR_UNSUPPORTED_ARCH, pending_refusal(*p));
    fail(VT_ERR_UNSUPPORTED_ARCH, "architecture `" + c.architecture + "` is not supported");
  }
  return *e;
}

std::string supported_architectures() {
  std::string s;
  for (const ModelEntry &e : kModels) s += (s.empty() ? "" : ", ") + std::string(e.architecture);
  return s;
}

const PendingModel *find_pending_model(std::string_view architecture) {
  for (const PendingModel &p : kPending)
    if (architecture == p.architecture) return &p;
  return nullptr;
}

std::string pending_refusal(const PendingModel &p) {
  return "architecture `" + std::string(p.architecture) + "` (" + p.name +
         ") is recognised but not supported yet: this version cannot run its hybrid layers, Gated DeltaNet linear "
         "attention interleaved with gated attention (supported: " + supported_architectures() + ")";
}

}  // namespace vt
