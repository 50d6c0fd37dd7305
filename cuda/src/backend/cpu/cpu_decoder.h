// The CPU backend's decoder (the engine's Decoder interface, models/decoder.h): the architecture's model
// (models/registry.h) run by CpuModelOps, and the final projection of chosen rows.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_model_ops.h"
#include "host_pages.h"
#include "kv_cache.h"
#include "loader/config.h"
#include "loader/weights.h"
#include "models/decoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace vt {

class CpuDecoder : public Decoder {
 public:
  // make: the model to run (tests); null: the registry's for the config's architecture.
  CpuDecoder(const ModelConfig &config, Weights weights, cpu::ThreadPool &pool, KvCache &kv, int32_t max_tokens,
             decltype(ModelEntry::make) make = nullptr);

  void forward(const ForwardBatch &b) override;
  // Only rows that are needed pay for the large vocabulary projection.
  void project(const int32_t *rows, int32_t n, float *logits) override;

  // The activations and scratch this decoder allocated (the plan sizes the same: MemoryPlan::activation_bytes).
  int64_t activation_bytes() const { return ops_.allocated_bytes(); }

 private:
  ModelConfig c_;
  Weights w_;
  int32_t max_tokens_;
  CpuModelOps ops_;
  std::unique_ptr<Model> model_;  // after w_ and ops_: it binds the one and declares its tensors with the other
};

}  // namespace vt
