// plan_memory's CUDA-graph part: the checks of vt_cuda_graphs (each bad field is INVALID_OPTION naming it), and the
// bucket list it plans — given buckets as they are, else the default rule, checked here against the rule written
// out independently (powers of two up to min(max_batch or 256, max_seqs), plus that bound when it is not one).
// And the KV pool: the CPU's default rounded up to whole blocks (maxContext 9000 loads), and the CUDA pool's
// ceiling, base and chunks on made-up GPUs (plan_memory_on), with the errors naming the option that fixes them; and a
// hybrid model's state slots, fixed or growing.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "backend/cuda/cuda_decoder.h"
#include "backend/cuda/cuda_plan.h"
#include "memory_plan.h"
#include "status.h"


using Buckets = std::vector<int32_t>;

template <class T>
static const T *ptr(const T &x) { return &x; }

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
  const int32_t top = std::min(max_batch > 0 ? max_batch : 256, max_seqs);
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
  CHECK((planned(params(300, -1, 0)) == Buckets{1, 2, 4, 8, 16, 32, 64, 128, 256}));  // 256 caps the default
  CHECK((planned(params(256, -1, 0)) == Buckets{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  CHECK((planned(params(200, -1, 0)) == Buckets{1, 2, 4, 8, 16, 32, 64, 128, 200}));
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
  CHECK((planned(params(0, -1, 0, {256})) == Buckets{256}));            // the GPU's default bounds them
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
  CHECK(rejected(params(0, -1, 0, {1, 257}), "cudaGraphs.buckets[1]"));  // above the GPU's default maxSeqs, 256
  CHECK(rejected(params(0, -1, 0, {1, 257}), "maxSeqs (256, its default on the GPU)"));
  CHECK(rejection(params(0, -1, 0, {1, 200})).empty());  // (on the CPU, where maxSeqs is 64, they are ignored)
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

// --- the KV pool ------------------------------------------------------------------------------------------------

static vt::ModelConfig long_config() {  // the tiny model with room for long contexts
  vt::ModelConfig c = tiny_config();
  c.max_position_embeddings = 32768;
  return c;
}

// The message of the OUT_OF_MEMORY that f throws, or "" when it throws nothing (or something else).
template <class F>
static std::string oom_message(F f) {
  try {
    f();
  } catch (const vt::Error &e) {
    return e.status() == VT_ERR_OUT_OF_MEMORY ? std::string(e.what()) : "";
  }
  return "";
}

static bool names(const std::string &message, const std::string &what) {
  const bool ok = message.find(what) != std::string::npos;
  if (!ok) std::printf("  expected \"%s\" in \"%s\"\n", what.c_str(), message.c_str());
  return ok;
}

// The CPU's pool: max(maxContext, 4096) tokens rounded UP to whole blocks, so any maxContext fits the default; a
// kvCacheBytes given is cut DOWN to whole blocks, and one too small says to raise it (it was set).
static void cpu_pool() {
  vt_engine_params p = default_params();
  p.device = VT_DEVICE_CPU;
  p.max_context = 9000;  // not a multiple of 16: the pool used to round down to 8992 tokens and refuse the load
  const vt::MemoryPlan m = vt::plan_memory(long_config(), p);
  CHECK(m.n_blocks == 563 && int64_t(m.n_blocks) * m.block_size >= 9000);
  CHECK(m.kv_cache_bytes == int64_t(m.n_blocks) * m.block_size * m.kv_bytes_per_token);
  CHECK(m.n_blocks_base == m.n_blocks && m.kv_chunk_blocks == 0 && m.kv_base_bytes == m.kv_cache_bytes);
  CHECK(m.kv_bytes_per_token == 2 * 2 * 2 * 16 * 4);  // 2 layers, K and V, 2 heads x 16, fp32
  CHECK(m.max_seqs == vt::kDefaultMaxSeqsCpu);
  for (int32_t ctx : {1, 15, 17, 4095, 4097, 9000, 32767}) {
    p.max_context = ctx;
    const vt::MemoryPlan q = vt::plan_memory(long_config(), p);
    CHECK(int64_t(q.n_blocks) * q.block_size >= std::max(ctx, 4096) && int64_t(q.n_blocks - 1) * q.block_size < std::max(ctx, 4096));
  }
  p.max_context = 9000;
  p.kv_cache_bytes = 9000 * m.kv_bytes_per_token;  // 562.5 blocks' worth: 562 whole ones, short of 9000 tokens
  const std::string short_pool = oom_message([&] { vt::plan_memory(long_config(), p); });
  CHECK(names(short_pool, "kvCacheBytes " + std::to_string(p.kv_cache_bytes) + " holds 8992 tokens"));
  CHECK(names(short_pool, "raise kvCacheBytes to at least " + std::to_string(563 * 16 * m.kv_bytes_per_token)));
  p.kv_cache_bytes = 563 * 16 * m.kv_bytes_per_token + 100;
  CHECK(vt::plan_memory(long_config(), p).n_blocks == 563);
  p.kv_cache_bytes = 0;
  p.max_context = 0;  // the model's 32768 capped at 8192
  CHECK(vt::plan_memory(long_config(), p).n_blocks == 8192 / 16);
}

static vt::GpuFacts gpu(int64_t free_bytes, bool vmm = true) {
  vt::GpuFacts g;
  g.sm_count = 132, g.total_bytes = int64_t(80) << 30, g.free_bytes = free_bytes, g.vmm = vmm;
  g.granularity = int64_t(2) << 20;
  return g;
}

static vt_engine_params cuda_params() {
  vt_engine_params p = default_params();
  p.device = VT_DEVICE_CUDA;
  return p;
}

// The CUDA pool's ceiling by default: the GPU's free memory less the weights, workspaces, state slots and the
// reserve, cut to whole blocks and to maxSeqs x maxContext tokens; the base (mapped at load) is max(maxContext,
// 4096) tokens in whole chunks; the chunk is the fewest blocks whose bytes in one plane are whole 2 MiB granules.
static void cuda_pool_default() {
  const vt::ModelConfig c = long_config();
  const int64_t weights = int64_t(300) << 20;
  vt_engine_params p = cuda_params();
  p.max_context = 9000;
  // A roomy GPU: the ceiling is maxSeqs x maxContext tokens.
  const vt::MemoryPlan big = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30)));
  CHECK(big.cuda && big.max_seqs == vt::kDefaultMaxSeqsCuda && big.max_seqs == 256);
  CHECK(big.graph_buckets == (Buckets{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  CHECK(big.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2);  // bf16 on the GPU
  const int64_t block_bytes = big.kv_bytes_per_token * 16, need = (9000 + 15) / 16;
  CHECK(big.n_blocks == 256 * need);
  // One plane's block is 16 x 2 x 16 x 2 = 1 KiB: 2048 of them fill a granule.
  CHECK(big.kv_chunk_blocks == 2048);
  CHECK(big.n_blocks_base == 2048 && big.kv_base_bytes == 2048 * block_bytes);
  CHECK(big.kv_cache_bytes == int64_t(big.n_blocks) * block_bytes);
  CHECK(big.workspace_bytes > 0);

  // A GPU with 40 MiB left for the pool after the rest: the ceiling is what is free, in whole blocks.
  const int64_t others = weights + big.workspace_bytes + big.state_slot_bytes + vt::kGpuReserveBytes;
  const int64_t left = (int64_t(40) << 20) + 1000;
  const vt::MemoryPlan tight = vt::plan_memory_on(c, p, weights, ptr(gpu(others + left)));
  CHECK(tight.n_blocks == left / block_bytes && tight.n_blocks == 10240);
  CHECK(tight.n_blocks_base == 2048 && tight.n_blocks_base % tight.kv_chunk_blocks == 0);
  // Less than a chunk above maxContext: the base is the ceiling (not a whole chunk).
  const vt::MemoryPlan small = vt::plan_memory_on(c, p, weights, ptr(gpu(others + 600 * block_bytes)));
  CHECK(small.n_blocks == 600 && small.n_blocks_base == 600 && small.kv_base_bytes == 2048 * block_bytes);

  // Too little for maxContext: ERR_OUT_OF_MEMORY naming maxContext, never an option the user did not set.
  const std::string m = oom_message([&] { vt::plan_memory_on(c, p, weights, ptr(gpu(others + 100 * block_bytes))); });
  CHECK(names(m, "less than maxContext 9000 tokens need") && names(m, "lower maxContext"));
  CHECK(m.find("kvCacheBytes") == std::string::npos && m.find("gpuMemoryUtilization") == std::string::npos);
  CHECK(names(oom_message([&] { vt::plan_memory_on(c, p, weights, ptr(gpu(others / 2))); }), "lower maxContext"));

  // maxSeqs given: it, its buckets, and the cap it puts on the ceiling.
  p.max_seqs = 8;
  const vt::MemoryPlan eight = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30)));
  CHECK(eight.max_seqs == 8 && eight.n_blocks == 8 * need && eight.graph_buckets == (Buckets{1, 2, 4, 8}));
  p.max_seqs = 0;
  // A maxContext below 4096: the base still holds 4096 tokens (here within the first chunk).
  p.max_context = 100;
  const vt::MemoryPlan shortctx = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30)));
  CHECK(shortctx.n_blocks == 256 * 7 && shortctx.n_blocks_base == 256 * 7);  // the ceiling is below a chunk
  // Without the free figure (plan_memory's validation before the weights are read): the base pool.
  p.max_context = 9000;
  vt::GpuFacts unknown = gpu(-1);
  const vt::MemoryPlan prelim = vt::plan_memory_on(c, p, weights, &unknown);
  CHECK(prelim.n_blocks == 563 && prelim.n_blocks_base == 563);
}

// kvCacheBytes and gpuMemoryUtilization on the GPU set the ceiling; the base is the default's, at most the ceiling.
static void cuda_pool_given() {
  const vt::ModelConfig c = long_config();
  const int64_t weights = int64_t(300) << 20;
  vt_engine_params p = cuda_params();
  p.max_context = 9000;
  const vt::GpuFacts g = gpu(int64_t(60) << 30);
  const int64_t block_bytes = 2 * 2 * 2 * 16 * 2 * 16;
  p.kv_cache_bytes = 5000 * block_bytes + 7;
  const vt::MemoryPlan given = vt::plan_memory_on(c, p, weights, &g);
  CHECK(given.n_blocks == 5000 && given.kv_cache_bytes == 5000 * block_bytes && given.n_blocks_base == 2048);
  p.kv_cache_bytes = 500 * block_bytes;
  const std::string m = oom_message([&] { vt::plan_memory_on(c, p, weights, &g); });
  CHECK(names(m, "raise kvCacheBytes to at least " + std::to_string(563 * block_bytes)));
  p.kv_cache_bytes = 0;

  p.gpu_memory_utilization = 0.5;
  const vt::MemoryPlan share = vt::plan_memory_on(c, p, weights, &g);
  const int64_t kv = (int64_t(40) << 30) - weights - share.workspace_bytes - share.state_slot_bytes - vt::kGpuReserveBytes;
  CHECK(share.n_blocks == kv / block_bytes && share.n_blocks_base == 2048 && share.kv_chunk_blocks == 2048);
  p.gpu_memory_utilization = 0.005;  // 409 MiB of 80 GiB: less than the weights and the reserve
  const std::string u = oom_message([&] { vt::plan_memory_on(c, p, weights, &g); });
  CHECK(names(u, "raise gpuMemoryUtilization") && u.find("kvCacheBytes") == std::string::npos);
  p.gpu_memory_utilization = 0;

  // No virtual memory management: a fixed pool, the default's base size (whole blocks), or all that was asked.
  const vt::GpuFacts old = gpu(int64_t(60) << 30, /*vmm=*/false);
  const vt::MemoryPlan fixed = vt::plan_memory_on(c, p, weights, &old);
  CHECK(fixed.n_blocks == 563 && fixed.n_blocks_base == 563 && fixed.kv_chunk_blocks == 0);
  CHECK(fixed.kv_base_bytes == fixed.kv_cache_bytes);
  p.kv_cache_bytes = 5000 * block_bytes;
  const vt::MemoryPlan fixed_given = vt::plan_memory_on(c, p, weights, &old);
  CHECK(fixed_given.n_blocks == 5000 && fixed_given.n_blocks_base == 5000 && fixed_given.kv_chunk_blocks == 0);
}

// Qwen3's shapes (8 KV heads x 128, bf16, 16-token blocks): a plane's block is 32 KiB, so a chunk is 64 blocks (1024
// tokens) and the default base of 8192 tokens is 8 chunks.
static void qwen3_chunks() {
  CHECK(vt::kv_chunk_blocks(16 * 8 * 128 * 2, int64_t(2) << 20) == 64);
  CHECK(vt::kv_chunk_blocks(16 * 8 * 128 * 4, int64_t(2) << 20) == 32);   // fp32 activations
  CHECK(vt::kv_chunk_blocks(7 * 8 * 128 * 2, int64_t(2) << 20) == 1024);  // 7-token blocks: 14 KiB
  CHECK(vt::kv_chunk_blocks(int64_t(4) << 20, int64_t(2) << 20) == 1);    // a block of two granules
  CHECK(vt::kv_chunk_blocks(3 << 20, int64_t(2) << 20) == 2);             // 1.5 granules: 2 blocks are 3
  for (int64_t plane : {int64_t(1000), int64_t(32768), int64_t(10240), int64_t(3) << 19}) {
    const int64_t k = vt::kv_chunk_blocks(plane, int64_t(2) << 20);
    bool fewest = (k * plane) % (int64_t(2) << 20) == 0;
    for (int64_t j = 1; j < k && fewest; ++j) fewest = (j * plane) % (int64_t(2) << 20) != 0;
    CHECK(fewest);
  }
}

// With bf16 activations our tensor-core GEMMs run a SwiGLU layer as one fused product, so the plan holds no gate|up
// scratch (max_tokens x 2I in bf16: 403 MB for an 8B at 8,192 rows); the cuBLASLt A/B arm (VT_CUDA_GEMM=cublaslt)
// runs the product and silu_mul apart, and plans exactly that scratch more. fp32 activations keep it either way.
static void fused_swiglu_scratch() {
  const vt::ModelConfig c = tiny_config();
  vt::CudaDecoderParams p;
  p.act = vt::cuda::Act::BF16;
  p.max_tokens = 512, p.max_seqs = 8, p.max_logit_rows = 8, p.block_size = 16, p.max_context = 1024;
  const int64_t ours = vt::CudaDecoder::plan_workspace(c, p, 132, false).total;
  p.tuning.gemm = "cublaslt";
  const int64_t split = vt::CudaDecoder::plan_workspace(c, p, 132, false).total;
  CHECK(split - ours == int64_t(512) * 2 * c.intermediate_size * 2);
  // An fp32 checkpoint (by its config's dtype): its SwiGLU layers are not fused, so both plans keep the scratch, as
  // the engine allocates it (the golden check's fp32 fixtures, whose workspaces the plan must match to the byte). An
  // fp16 one's matrices become bf16 at load under bf16 activations, so it plans as a bf16 one.
  for (const char *dtype : {"float16", "float32"}) {
    vt::ModelConfig cd = c;
    cd.torch_dtype = dtype;
    vt::CudaDecoderParams q = p;
    q.tuning.gemm.clear();
    const int64_t ours_d = vt::CudaDecoder::plan_workspace(cd, q, 132, false).total;
    q.tuning.gemm = "cublaslt";
    const int64_t split_d = vt::CudaDecoder::plan_workspace(cd, q, 132, false).total;
    CHECK(split_d == split);
    CHECK(ours_d == (std::string(dtype) == "float16" ? ours : split));
  }
  p.act = vt::cuda::Act::F32;
  const int64_t f32_lt = vt::CudaDecoder::plan_workspace(c, p, 132, false).total;
  p.tuning.gemm.clear();
  CHECK(vt::CudaDecoder::plan_workspace(c, p, 132, false).total == f32_lt);
}

// A hybrid model's state slots (the qwen3_5-f32 fixture: 3 Gated DeltaNet layers, 31,488 bytes a slot), a slot per
// seat: a fixed set on the CPU and on a GPU without virtual memory management; on one with it a growing region,
// padded to 32 KiB a slot so that a chunk (one 2 MiB granule) holds 64 of them (cuda::slot_layout), of which the load
// maps the first. The default ceiling leaves room for that base only (the pool and the slots both grow into what is
// free); a utilization budget for all of them (the engine stays inside it at its most).
static void hybrid_slots() {
  const vt::ModelConfig c = vt::load_model_config("test/fixtures/qwen3_5-f32");
  vt_engine_params p = default_params();
  p.device = VT_DEVICE_CPU;
  const vt::MemoryPlan cpu = vt::plan_memory(c, p);
  const int64_t slot = cpu.state.slot_elems() * 4;
  CHECK(slot == 31488 && cpu.n_state_slots == 64 && cpu.state_slot_stride == slot && cpu.state_slot_chunk == 0);
  CHECK(cpu.state_slot_bytes == 64 * slot && cpu.n_state_slots_base == 64 && cpu.state_slot_base_bytes == 64 * slot);

  p = cuda_params();
  const int64_t weights = int64_t(300) << 20;
  const vt::MemoryPlan big = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30)));
  CHECK(big.n_state_slots == 256 && big.state_slot_stride == 32768 && big.state_slot_chunk == 64);
  CHECK(big.state_slot_bytes == 256 * 32768 && big.n_state_slots_base == 64 && big.state_slot_base_bytes == 2 << 20);
  const vt::CudaDecoderParams cp = vt::cuda_decoder_params(big, p);
  CHECK(cp.slots_grow && cp.n_state_slots == 256 && cp.n_state_slots_base == 64 && cp.state_slot_stride == 32768);
  // Four seats: the first chunk is the whole region (a granule, of which the slots take four).
  p.max_seqs = 4;
  const vt::MemoryPlan four = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30)));
  CHECK(four.n_state_slots == 4 && four.n_state_slots_base == 4 && four.state_slot_bytes == 4 * four.state_slot_stride);
  CHECK(four.state_slot_base_bytes == int64_t(four.state_slot_chunk) * four.state_slot_stride);
  CHECK(four.state_slot_base_bytes % (2 << 20) == 0);
  p.max_seqs = 0;

  // The default ceiling: what is free less the slots' base (not all 256 slots).
  const int64_t block_bytes = big.kv_bytes_per_token * big.block_size;
  const int64_t others = weights + big.workspace_bytes + big.state_slot_base_bytes + vt::kGpuReserveBytes;
  const vt::MemoryPlan tight = vt::plan_memory_on(c, p, weights, ptr(gpu(others + 1000 * block_bytes + 5)));
  CHECK(tight.n_blocks == 1000);
  const std::string m = oom_message([&] { vt::plan_memory_on(c, p, weights, ptr(gpu(others + 10 * block_bytes))); });
  CHECK(names(m, "state slots 2 MiB") && names(m, "lower maxContext"));

  // A utilization budget holds every slot.
  p.gpu_memory_utilization = 0.5;
  const vt::MemoryPlan share = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30)));
  const int64_t kv = (int64_t(40) << 30) - weights - share.workspace_bytes - share.state_slot_bytes - vt::kGpuReserveBytes;
  CHECK(share.n_blocks == kv / block_bytes && share.state_slot_chunk == 64);
  p.gpu_memory_utilization = 0;

  // No virtual memory management: all of them at load, unpadded.
  const vt::MemoryPlan old = vt::plan_memory_on(c, p, weights, ptr(gpu(int64_t(60) << 30, /*vmm=*/false)));
  CHECK(old.state_slot_chunk == 0 && old.state_slot_stride == slot && old.n_state_slots_base == 256);
  CHECK(old.state_slot_base_bytes == 256 * slot && old.state_slot_bytes == 256 * slot);
  CHECK(!vt::cuda_decoder_params(old, p).slots_grow);
}

int main() {
  fused_swiglu_scratch();
  gpu_memory_utilization();
  prefix_caching();
  defaults();
  given_buckets();
  bad_fields();
  random_defaults();
  cpu_pool();
  cuda_pool_default();
  cuda_pool_given();
  qwen3_chunks();
  hybrid_slots();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
