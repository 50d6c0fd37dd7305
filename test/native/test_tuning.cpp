// tuning_from_env (cuda/src/tuning.h): each switch read as documented, bad values left at the default, the one
// interaction it resolves (penalties on the device only where sampling is), the timing switches ignored outside
// experiments builds (this test is built without VT_EXPERIMENTS, as the addon is), and the settled null
// controls no longer read. And the plan carries the tuning it was made with, into the CUDA decoder's params.
#include <cstdlib>
#include <string>

#include "check.h"
#include "backend/cuda/cuda_plan.h"
#include "memory_plan.h"
#include "tuning.h"

namespace {

const char *const kAll[] = {"VT_CUDA_CUBLASLT", "VT_CUDA_GEMM", "VT_CUDA_SAMPLE", "VT_CUDA_PENALTIES", "VT_CUDA_ATTN",
                            "VT_CUDA_SUBLAYER_F32", "VT_CUDA_SPLIT_KEYS", "VT_CUDA_SKIP", "VT_CUDA_REPLAY",
                            "VT_CUDA_GEMM_SHAPES", "VT_CPU_OVERLAP", "VT_CUDA_FUSED_NORM", "VT_CUDA_OVERLAP", "VT_CUDA_PDL",
                            "VT_CUDA_EARLY_LOADS", "VT_CUDA_ARGMAX_PARTS", "VT_CUDA_ATTN_CLUSTER"};

void clear() {
  for (const char *n : kAll) unsetenv(n);
}

bool is_default(const vt::Tuning &t) {
  const vt::Tuning d;
  return t.cuda.cublaslt == d.cuda.cublaslt && t.cuda.gemm == d.cuda.gemm && t.cuda.sample_on_device == d.cuda.sample_on_device &&
         t.cuda.penalties_on_device == d.cuda.penalties_on_device && t.cuda.attention == d.cuda.attention &&
         t.cuda.sublayer_f32 == d.cuda.sublayer_f32 && t.cuda.skip == d.cuda.skip && t.cuda.replays == d.cuda.replays &&
         t.cuda.pdl == d.cuda.pdl && t.cuda.ops.early_loads == d.cuda.ops.early_loads &&
         t.cuda.ops.attention_cluster == d.cuda.ops.attention_cluster &&
         t.cuda.ops.argmax_parts == d.cuda.ops.argmax_parts && t.cuda.ops.split_keys == d.cuda.ops.split_keys &&
         t.cuda.gemm_shapes == d.cuda.gemm_shapes;
}

}  // namespace

int main() {
  clear();
  {  // the product: every default, and they are the documented ones
    const vt::Tuning t = vt::tuning_from_env();
    CHECK(is_default(t));
    CHECK(t.cuda.cublaslt && t.cuda.sample_on_device && t.cuda.penalties_on_device && t.cuda.pdl);
    CHECK(t.cuda.attention.empty() && !t.cuda.sublayer_f32 && t.cuda.skip == 0 && t.cuda.replays == 1);
    CHECK(t.cuda.gemm.empty());  // our tensor-core GEMMs
    CHECK(t.cuda.ops.early_loads && t.cuda.ops.attention_cluster && t.cuda.ops.argmax_parts);
    CHECK(t.cuda.ops.split_keys == 64);
  }
  {  // the user / bug-report switches
    setenv("VT_CUDA_CUBLASLT", "0", 1);
    setenv("VT_CUDA_SUBLAYER_F32", "1", 1);
    setenv("VT_CUDA_ATTN", "noprefill", 1);
    setenv("VT_CUDA_GEMM", "cublaslt", 1);
    setenv("VT_CPU_OVERLAP", "1", 1);  // gone (test/native/test_engine_overlap.cpp's fake decoder): named, not read
    const vt::Tuning t = vt::tuning_from_env();
    CHECK(!t.cuda.cublaslt);
    CHECK(t.cuda.sublayer_f32);
    CHECK(t.cuda.attention == "noprefill");
    CHECK(t.cuda.gemm == "cublaslt");
    CHECK(t.cuda.sample_on_device && t.cuda.penalties_on_device);
    clear();
  }
  {  // a value VT_CUDA_GEMM does not know is ignored
    setenv("VT_CUDA_GEMM", "tiled", 1);
    CHECK(vt::tuning_from_env().cuda.gemm.empty());
    clear();
  }
  {  // penalties on the device only where the device samples
    setenv("VT_CUDA_SAMPLE", "0", 1);
    setenv("VT_CUDA_PENALTIES", "1", 1);
    vt::Tuning t = vt::tuning_from_env();
    CHECK(!t.cuda.sample_on_device && !t.cuda.penalties_on_device);
    setenv("VT_CUDA_SAMPLE", "1", 1);
    setenv("VT_CUDA_PENALTIES", "0", 1);
    t = vt::tuning_from_env();
    CHECK(t.cuda.sample_on_device && !t.cuda.penalties_on_device);
    clear();
  }
  {  // bad values: the default, never a half-parsed value
    setenv("VT_CUDA_CUBLASLT", "off", 1);
    setenv("VT_CUDA_SAMPLE", "", 1);
    setenv("VT_CUDA_ATTN", "fast", 1);
    setenv("VT_CPU_OVERLAP", "yes", 1);
    CHECK(is_default(vt::tuning_from_env()));
    clear();
  }
  {  // timing switches: read only by experiments builds (this one is not), so the product cannot run them
    setenv("VT_CUDA_SKIP", "norm+attn", 1);
    setenv("VT_CUDA_REPLAY", "4", 1);
    setenv("VT_CUDA_SPLIT_KEYS", "200", 1);
    setenv("VT_CUDA_GEMM_SHAPES", "/tmp/shapes.txt", 1);
    const vt::Tuning t = vt::tuning_from_env();
#if defined(VT_EXPERIMENTS)
    CHECK(t.cuda.skip == (vt::kSkipNorm | vt::kSkipAttn) && t.cuda.replays == 4 && t.cuda.ops.split_keys == 256);
    CHECK(t.cuda.gemm_shapes == "/tmp/shapes.txt");
#else
    CHECK(t.cuda.skip == 0 && t.cuda.replays == 1 && t.cuda.ops.split_keys == 64 && t.cuda.gemm_shapes.empty());
#endif
    clear();
  }
  {  // the null controls of settled A/B tests are gone: setting them changes nothing
    for (const char *n : {"VT_CUDA_FUSED_NORM", "VT_CUDA_OVERLAP", "VT_CUDA_PDL", "VT_CUDA_EARLY_LOADS",
                          "VT_CUDA_ARGMAX_PARTS", "VT_CUDA_ATTN_CLUSTER"})
      setenv(n, "0", 1);
    CHECK(is_default(vt::tuning_from_env()));
    clear();
  }
  {  // the plan carries its tuning into the CUDA decoder's params: what the estimate sized is what gets built
    vt::ModelConfig c;
    c.architecture = "LlamaForCausalLM";
    c.vocab_size = 384, c.hidden_size = 64, c.intermediate_size = 160, c.n_layers = 2, c.n_heads = 4;
    c.n_kv_heads = 2, c.head_dim = 16, c.max_position_embeddings = 1024;
    vt_engine_params p{};
    p.device = VT_DEVICE_CPU;
    p.cuda_graphs.enabled = -1;
    setenv("VT_CUDA_SAMPLE", "0", 1);
    const vt::MemoryPlan plan = vt::plan_memory(c, p);
    unsetenv("VT_CUDA_SAMPLE");
    CHECK(!plan.tuning.cuda.sample_on_device);
    CHECK(!vt::cuda_decoder_params(plan, p).tuning.sample_on_device);  // read when planned, not again later
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
