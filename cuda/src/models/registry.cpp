#include "models/registry.h"

#include "models/dense_model.h"
#include "status.h"

namespace vt {

namespace {

std::unique_ptr<Model> make_dense(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  return std::make_unique<DenseModel>(c, w, ops);
}

constexpr ModelEntry kModels[] = {
    {"LlamaForCausalLM", "llama", Family::Llama, make_dense, DenseModel::weight_shapes, StateLayout::all_attention},
    {"MistralForCausalLM", "mistral", Family::Llama, make_dense, DenseModel::weight_shapes, StateLayout::all_attention},
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2, make_dense, DenseModel::weight_shapes, StateLayout::all_attention},
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3, make_dense, DenseModel::weight_shapes, StateLayout::all_attention},
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
  return *e;
}

std::string supported_architectures() {
  std::string s;
  for (const ModelEntry &e : kModels) s += (s.empty() ? "" : ", ") + std::string(e.architecture);
  return s;
}

}  // namespace vt
