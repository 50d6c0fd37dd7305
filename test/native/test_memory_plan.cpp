// plan_memory's CUDA-graph part: the checks of vt_cuda_graphs (each bad field is INVALID_OPTION naming it), and the
// bucket list it plans — given buckets as they are, else the default rule, checked here against the rule written
// out independently (powers of two up to min(max_batch or 128, max_seqs), plus that bound when it is not one).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "memory_plan.h"
#include "status.h"


using Buckets = std::vector<int32_t>;

static vt::ModelConfig tiny_config() {
  vt::ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 384;
  c.hidden_size = 64;
  c.intermediate_size = 160;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 1024;
  return c;
}

// vt_engine_default_params() as c_api.cpp writes it; not called, so this test links without the whole engine.
static vt_engine_params default_params() {
  vt_engine_params p{};
  p.device = VT_DEVICE_AUTO;
  p.cuda_graphs.enabled = -1;
  return p;
}

static vt_engine_params params(int32_t max_seqs, int32_t enabled, int32_t max_batch, const Buckets &buckets = {}) {
  vt_engine_params p = default_params();
  p.max_seqs = max_seqs;
  p.cuda_graphs.enabled = enabled;
  p.cuda_graphs.max_batch = max_batch;
  p.cuda_graphs.n_buckets = int32_t(buckets.size());
  for (size_t i = 0; i < buckets.size() && i < 32; ++i) p.cuda_graphs.buckets[i] = buckets[i];
  return p;
}

static Buckets planned(const vt_engine_params &p) { return vt::plan_memory(tiny_config(), p).graph_buckets; }

// The message of the INVALID_OPTION plan_memory throws, or "" when it throws nothing (or something else).
static std::string rejection(const vt_engine_params &p) {
  try {
    vt::plan_memory(tiny_config(), p);
  } catch (const vt::Error &e) {
    return e.status() == VT_ERR_INVALID_OPTION ? std::string(e.what()) : "";
  }
  return "";
}

static bool rejected(const vt_engine_params &p, const std::string &names) {
  const std::string m = rejection(p);
  if (m.find(names) == std::string::npos) {
    std::printf("  expected a rejection naming %s, got \"%s\"\n", names.c_str(), m.c_str());
    return false;
  }
  return true;
}

static Buckets reference_buckets(int32_t max_seqs, int32_t max_batch) {
  const int32_t top = std::min(max_batch > 0 ? max_batch : 128, max_seqs);
  Buckets b;
  for (int32_t x = 1; x <= top; x *= 2) b.push_back(x);
  if ((top & (top - 1)) != 0) b.push_back(top);
  return b;
}

static void defaults() {
  const vt_engine_params d = default_params();
  const vt::MemoryPlan m = vt::plan_memory(tiny_config(), d);
  CHECK(m.max_seqs == 64);
  CHECK((m.graph_buckets == Buckets{1, 2, 4, 8, 16, 32, 64}));
  CHECK(!m.graph_dedup);
  CHECK(!m.graph_first_use);

  CHECK((planned(params(0, 1, 0)) == Buckets{1, 2, 4, 8, 16, 32, 64}));  // on = the default
  CHECK(planned(params(0, 0, 0)).empty());
  CHECK(planned(params(0, 0, 8, {1, 3})).empty());  // off wins over sizes
  CHECK((planned(params(100, -1, 0)) == Buckets{1, 2, 4, 8, 16, 32, 64, 100}));
  CHECK((planned(params(300, -1, 0)) == Buckets{1, 2, 4, 8, 16, 32, 64, 128}));  // 128 caps the default
  CHECK((planned(params(300, -1, 200)) == Buckets{1, 2, 4, 8, 16, 32, 64, 128, 200}));
  CHECK((planned(params(0, -1, 100)) == Buckets{1, 2, 4, 8, 16, 32, 64}));  // maxBatch above maxSeqs acts as it
  CHECK((planned(params(0, -1, 48)) == Buckets{1, 2, 4, 8, 16, 32, 48}));
  CHECK((planned(params(0, -1, 1)) == Buckets{1}));
  CHECK((planned(params(1, -1, 0)) == Buckets{1}));
  CHECK((planned(params(3, -1, 0)) == Buckets{1, 2, 3}));
  CHECK(planned(params(4096, -1, 4096)).size() == 13 && planned(params(4096, -1, 4096)).back() == 4096);
  CHECK((vt::default_graph_buckets(0) == Buckets{}));
  CHECK((vt::default_graph_buckets(6) == Buckets{1, 2, 4, 6}));

  vt_engine_params dd = params(0, -1, 0);
  dd.cuda_graphs.dedup = 1;
  CHECK(vt::plan_memory(tiny_config(), dd).graph_dedup);
  vt_engine_params fu = params(0, -1, 0);
  fu.cuda_graphs.first_use = 1;
  const vt::MemoryPlan mf = vt::plan_memory(tiny_config(), fu);
  CHECK(mf.graph_first_use && !mf.graph_dedup);
  CHECK((mf.graph_buckets == Buckets{1, 2, 4, 8, 16, 32, 64}));  // the same buckets, captured later
}

static void given_buckets() {
  CHECK((planned(params(16, -1, 0, {3, 5, 9})) == Buckets{3, 5, 9}));
  CHECK((planned(params(16, -1, 9, {3, 5, 9})) == Buckets{3, 5, 9}));
  CHECK((planned(params(16, 1, 16, {3, 5, 9})) == Buckets{3, 5, 9}));  // maxBatch above them captures nothing more
  CHECK((planned(params(0, -1, 0, {64})) == Buckets{64}));              // up to the default maxSeqs
  Buckets all(32);
  for (int i = 0; i < 32; ++i) all[i] = 2 * i + 1;
  CHECK(planned(params(64, -1, 0, all)) == all);
}

static void bad_fields() {
  CHECK(rejected(params(0, 2, 0), "cudaGraphs.enabled"));
  CHECK(rejected(params(0, -2, 0), "cudaGraphs.enabled"));
  CHECK(rejected(params(0, -1, -1), "cudaGraphs.maxBatch"));
  CHECK(rejected(params(0, -1, 4097), "cudaGraphs.maxBatch"));
  CHECK(rejection(params(4096, -1, 4096)).empty());

  vt_engine_params n = params(0, -1, 0);
  n.cuda_graphs.n_buckets = -1;
  CHECK(rejected(n, "cudaGraphs.buckets"));
  n.cuda_graphs.n_buckets = 33;  // past the array: must be refused before any bucket is read
  CHECK(rejected(n, "cudaGraphs.buckets"));

  CHECK(rejected(params(0, -1, 0, {0}), "cudaGraphs.buckets[0]"));
  CHECK(rejected(params(0, -1, 0, {-4}), "cudaGraphs.buckets[0]"));
  CHECK(rejected(params(0, -1, 0, {1, 65}), "cudaGraphs.buckets[1]"));  // above the default maxSeqs, 64
  CHECK(rejected(params(8, -1, 0, {1, 2, 9}), "maxSeqs (8)"));
  CHECK(rejected(params(0, -1, 0, {4, 4}), "ascending"));
  CHECK(rejected(params(0, -1, 0, {1, 8, 4}), "ascending"));
  CHECK(rejected(params(0, -1, 8, {4, 16}), "cudaGraphs.maxBatch"));
  CHECK(rejected(params(0, 0, 0, {4, 4}), "ascending"));  // checked even when off

  vt_engine_params d = params(0, -1, 0);
  d.cuda_graphs.dedup = 2;
  CHECK(rejected(d, "cudaGraphs.dedup"));
  d.cuda_graphs.dedup = -1;
  CHECK(rejected(d, "cudaGraphs.dedup"));
  d.cuda_graphs.dedup = 0;
  d.cuda_graphs.first_use = 2;
  CHECK(rejected(d, "cudaGraphs.first_use"));
}

static void random_defaults() {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const int32_t max_seqs = std::uniform_int_distribution<int32_t>(1, 4096)(gen);
    const int32_t max_batch = trial % 4 == 0 ? 0 : std::uniform_int_distribution<int32_t>(1, 4096)(gen);
    const Buckets got = planned(params(max_seqs, trial % 2 ? -1 : 1, max_batch));
    const Buckets want = reference_buckets(max_seqs, max_batch);
    bool ok = got == want && !got.empty() && got.front() == 1 && got.back() <= max_seqs;
    for (size_t i = 1; i < got.size(); ++i) ok = ok && got[i] > got[i - 1];
    if (!ok) std::printf("  max_seqs %d max_batch %d: %zu buckets, want %zu\n", max_seqs, max_batch, got.size(), want.size());
    CHECK(ok);
  }
}

// gpu_memory_utilization: a share in (0, 1] or 0, never with kv_cache_bytes; on the CPU backend it changes nothing.
static void gpu_memory_utilization() {
  vt_engine_params p = default_params();
  p.device = VT_DEVICE_CPU;
  for (double bad : {-0.1, 1.5}) {
    p.gpu_memory_utilization = bad;
    CHECK(rejected(p, "gpuMemoryUtilization"));
  }
  p.gpu_memory_utilization = 0.5;
  p.kv_cache_bytes = int64_t(1) << 30;
  CHECK(rejected(p, "not both"));
  p.kv_cache_bytes = 0;
  const vt::MemoryPlan a = vt::plan_memory(tiny_config(), p), b = vt::plan_memory_for(tiny_config(), p, 123456789);
  CHECK(!a.cuda && !b.cuda);
  CHECK(a.n_blocks == b.n_blocks && a.kv_cache_bytes == b.kv_cache_bytes && a.workspace_bytes == b.workspace_bytes);
}

// prefix_caching: 0 (the default, as in zero-initialized params) and 1 are on, -1 off, anything else refused.
static void prefix_caching() {
  vt_engine_params p = default_params();
  p.device = VT_DEVICE_CPU;
  CHECK(vt::plan_memory(tiny_config(), p).prefix_caching);
  p.prefix_caching = 1;
  CHECK(vt::plan_memory(tiny_config(), p).prefix_caching);
  p.prefix_caching = -1;
  CHECK(!vt::plan_memory(tiny_config(), p).prefix_caching);
  for (int32_t bad : {2, -2, 1 << 30}) {
    p.prefix_caching = bad;
    CHECK(rejected(p, "prefix_caching"));
  }
}

int main() {
  gpu_memory_utilization();
  prefix_caching();
  defaults();
  given_buckets();
  bad_fields();
  random_defaults();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
