// Models written over ModelOps on the CUDA backend, with no CUDA code of their own: the dense model (the registry's,
// models/dense_model.cpp) and test/native/model_fixture.h's variant (each layer's MLP before its attention), each
// through a CudaDecoder (backend/cuda/cuda_decoder.cpp over cuda_model_ops.cpp) against model_fixture.h's float64
// reference: a 6-row prefill step, then a 1-row decode step (the fused GEMVs' rows: lazily normed inputs, RoPE in
// the q|k|v epilogue where the GPU has it), in three settings:
//   fp32 activations and weights, no graphs: the reference to fp32 rounding (1e-4, as on the CPU);
//   bf16 activations and weights, no graphs, then with the decode step replayed from a CUDA graph (its lm_head
//   folding the final norm in): bf16 rounding of every product's input, 3e-2 (any wrong op is above 0.3 here: the
//   dense and variant logits differ by more than 1 wherever they are compared).
//
//   model_cuda        exit 0 when every check passed; 2 when there is no usable GPU.
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_decoder.h"
#include "backend/cuda/driver.h"
#include "check.h"
#include "model_fixture.h"

using namespace vt;
using namespace model_fixture;

namespace {

double run_cuda(const std::string &name, const RandomCheckpoint &ck, cuda::Act act, bool graphs,
                decltype(ModelEntry::make) make, bool mlp_first, std::vector<float> *first_logits) {
  const ModelConfig c = config();
  CudaDecoderParams p;
  p.act = act, p.max_tokens = 8, p.max_seqs = 1, p.max_logit_rows = 8, p.n_blocks = 1, p.block_size = 16;
  p.max_context = 16;
  p.state = StateLayout::all_attention(c);
  if (graphs) p.graph_buckets = {1};
  CudaDecoder d(c, ck.w, nullptr, p, nullptr, make);
  const double worst = run_against_reference(d, ck, mlp_first, first_logits);
  std::printf("%s: max |logit - float64 reference| / max |reference| = %.2e over 7 positions\n", name.c_str(), worst);
  return worst;
}

}  // namespace

int main() {
  const cuda::Availability a = cuda::cuda_available();
  if (!a.ok) {
    std::printf("SKIP no usable GPU: %s\n", a.reason.c_str());
    return 2;
  }
  struct Setting {
    const char *name;
    bool bf16;
    bool graphs;
    double tol;
  };
  const Setting settings[] = {{"fp32", false, false, 1e-4}, {"bf16", true, false, 3e-2}, {"bf16 + graph", true, true, 3e-2}};
  for (const Setting &s : settings) {
    g_rng.seed(21);
    const RandomCheckpoint ck(s.bf16);
    const cuda::Act act = s.bf16 ? cuda::Act::BF16 : cuda::Act::F32;
    std::vector<float> dense, variant;
    CHECK(run_cuda(std::string(s.name) + " dense model", ck, act, s.graphs, nullptr, false, &dense) < s.tol);
    CHECK(run_cuda(std::string(s.name) + " variant (MLP first)", ck, act, s.graphs, MlpFirstModel::make, true, &variant) <
          s.tol);
    const double diff = max_abs_diff(dense, variant);
    std::printf("%s dense vs variant logits: max |difference| %.3f\n", s.name, diff);
    CHECK(diff > 1.0);
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
