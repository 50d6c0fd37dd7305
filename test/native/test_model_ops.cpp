// Models written over ModelOps (models/model_ops.h) run on a backend with no code of their own there: the dense
// model (models/dense_model.cpp) and a test-only variant assembled from the same ops in another order (each layer
// runs its MLP before its attention), each through the CPU backend's decoder (backend/cpu/cpu_decoder.cpp over
// cpu_model_ops.cpp), against a float64 reference written out in model_fixture.h from the architecture's
// definition. test/gpu/model_cuda.cpp runs the same on the CUDA backend. Also: the plan's activation bytes against
// the CPU decoder's allocation, for every fixture.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_decoder.h"
#include "check.h"
#include "loader/safetensors.h"
#include "memory_plan.h"
#include "model_fixture.h"
#include "vt_engine.h"

using namespace vt;
using namespace model_fixture;

namespace {

// The model (make; null: the registry's dense model) through a CpuDecoder over ck.
double run_cpu(const char *name, const RandomCheckpoint &ck, decltype(ModelEntry::make) make, bool mlp_first,
               std::vector<float> *first_logits) {
  const ModelConfig c = config();
  cpu::ThreadPool pool(2);
  KvCache kv(StateLayout::all_attention(c), 1, 16);
  CpuDecoder d(c, ck.w, pool, kv, 8, make);
  const double worst = run_against_reference(d, ck, mlp_first, first_logits);
  std::printf("%s: max |logit - float64 reference| / max |reference| = %.2e over 7 positions\n", name, worst);
  return worst;
}

}  // namespace

// For every fixture checkpoint: the bytes the plan gives the KV cache and the CPU decoder's activations (a sizing CpuModelOps over
// the model's weight shapes, as Engine.estimate reads them) against the bytes the decoder allocated when built
// over the checkpoint's real weights.
void plan_against_allocation() {
  const std::string root = "test/fixtures";  // the tests run from the repository root
  int checked = 0;
  for (const auto &entry : std::filesystem::directory_iterator(root)) {
    const std::string dir = entry.path().string();
    if (!std::filesystem::exists(dir + "/config.json") || !std::filesystem::exists(dir + "/reference.json")) continue;
    const ModelConfig c = load_model_config(dir);
    vt_engine_params p = vt_engine_default_params();
    p.device = VT_DEVICE_CPU;
    const MemoryPlan plan = plan_memory(c, p);
    const auto ck = Checkpoint::open(dir);
    cpu::ThreadPool pool(1);
    KvCache kv(plan.state, plan.n_blocks, plan.block_size, plan.n_state_slots);
    record(kv.bytes() == plan.kv_cache_bytes + plan.state_slot_bytes,
           entry.path().filename().string() + ": KV plan " + std::to_string(plan.kv_cache_bytes + plan.state_slot_bytes) +
               " B, allocated " + std::to_string(kv.bytes()) + " B");
    const CpuDecoder decoder(c, bind_weights(c, model_entry(c).schema(c), *ck, nullptr), pool, kv,
                             plan.max_batch_tokens);
    record(plan.activation_bytes > 0 && decoder.activation_bytes() == plan.activation_bytes,
           entry.path().filename().string() + ": plan " + std::to_string(plan.activation_bytes) + " B, allocated " +
               std::to_string(decoder.activation_bytes()) + " B");
    ++checked;
  }
  std::printf("plan against allocation: %d fixtures\n", checked);
  CHECK(checked >= 5);
}

int main() {
  g_rng.seed(21);
  plan_against_allocation();
  const RandomCheckpoint ck;
  std::vector<float> dense_logits, variant_logits;
  // fp32 against float64 over 2 layers: a few ulps of the logits' scale; 1e-4 leaves room and catches any wrong op
  // (a missing norm, a transposed weight, the wrong rope pairing are all above 1e-2 here).
  CHECK(run_cpu("dense model (attention, then MLP)", ck, nullptr, false, &dense_logits) < 1e-4);
  CHECK(run_cpu("variant (MLP, then attention)", ck, MlpFirstModel::make, true, &variant_logits) < 1e-4);
  // The two orders are different models: the check above could not pass with the variant run in the dense order.
  const double diff = max_abs_diff(dense_logits, variant_logits);
  std::printf("dense vs variant logits: max |difference| %.3f\n", diff);
  CHECK(diff > 0.1);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
