#include "models/weight_schema.h"

#include <algorithm>
#include <utility>

namespace vt {

const char *role_name(Role r) {
  static constexpr const char *kNames[kRoleCount] = {
      "embed", "lm_head", "final_norm", "attn_norm", "mlp_norm", "q",         "k",       "v",
      "o",     "q_bias",  "k_bias",     "v_bias",    "o_bias",   "q_norm",    "k_norm",  "gate",
      "up",    "down",    "gate_bias",  "up_bias",   "down_bias", "in_proj_qkv", "in_proj_z", "in_proj_b",
      "in_proj_a", "conv1d", "a_log", "dt_bias", "gdn_norm", "out_proj"};
  const int i = int(r);
  return i >= 0 && i < kRoleCount ? kNames[i] : "?";
}

int32_t WeightSchema::n_layers() const {
  int32_t n = 0;
  for (const TensorSpec &t : tensors) n = std::max(n, t.layer + 1);
  return n;
}

SchemaBuilder::SchemaBuilder(std::string body_prefix) : body_prefix_(std::move(body_prefix)), prefix_(body_prefix_) {
  schema.layers_prefix = body_prefix_ + "layers.";
}

SchemaBuilder &SchemaBuilder::body() {
  prefix_ = body_prefix_, layer_ = -1;
  return *this;
}

SchemaBuilder &SchemaBuilder::layer(int32_t l) {
  prefix_ = schema.layers_prefix + std::to_string(l) + ".", layer_ = l;
  return *this;
}

SchemaBuilder &SchemaBuilder::top() {
  prefix_.clear(), layer_ = -1;
  return *this;
}

SchemaBuilder &SchemaBuilder::matrix(Role role, const std::string &name, int64_t rows, int64_t cols) {
  return add({role, layer_, prefix_ + name, {rows, cols}, TensorSpec::kMatrix});
}

SchemaBuilder &SchemaBuilder::vector(Role role, const std::string &name, int64_t n) { return values(role, name, {n}); }

SchemaBuilder &SchemaBuilder::values(Role role, const std::string &name, std::vector<int64_t> shape) {
  return add({role, layer_, prefix_ + name, std::move(shape), TensorSpec::kVector});
}

SchemaBuilder &SchemaBuilder::optional(bool present, Role role, const std::string &name, int64_t n, const char *why) {
  return add({role, layer_, prefix_ + name, {n}, TensorSpec::kVector, why, !present});
}

SchemaBuilder &SchemaBuilder::add(TensorSpec s) {
  schema.tensors.push_back(std::move(s));
  return *this;
}

}  // namespace vt
