// Our side of issue 4's end-to-end GPU benchmark: the engine through its C ABI on device cuda, on a checkpoint
// folder (scripts/random_checkpoint.py makes the Qwen3-0.6B / Qwen3-8B shaped ones), with the workloads its peer
// bench/cuda_hf.py runs on transformers, fed the same prompt ids (prompt_ids below; ids < 1000, fixed seed):
//   decode   B requests of 128 tokens submitted together (B = 1, 8, 32, 128), 256 new tokens each, greedy, no
//            stop ids (so each makes exactly 256). tok/s = the tokens of every step after the step in which the
//            last request got its first token, over the time from that step to the last final event: steady
//            state, without the prefills and the batch filling up. At batch 1 also the mean inter-token interval.
//   prefill  one request of P random ids (P = 512, 2048, 8192), max_tokens 1: TTFT = submit -> token event,
//            prefill tok/s = P / TTFT (max_batch_tokens 8192, so the prompt runs as one chunk).
//   load     the checkpoint's files read through once (page cache warm), then vt_engine_load -> submit a
//            128-token prompt with max_tokens 1 -> its token event; the engine freed after each run. Also when
//            each load progress stage began (stage_start_ms: config, mapping, weights, cuda graphs, ready).
// Every measurement runs --runs times (prefill then decode in one loaded engine, after one untimed warm-up each;
// load in engines of their own, after it) and reports the median, min and max.
//
//   bench_cuda_engine --model DIR [--runs 3] [--dtype bfloat16|float32] [--graphs on|off] [--dedup on|off]
//                     [--capture load|first-use] [--json FILE]
//   (--dedup on: CUDA-graph buckets share executables; compare graphs_count / graphs_bytes with the default run;
//   --capture first-use: each bucket captured by its first decode step, cudaGraphs.capture)
//                     [--only decode,prefill,load] [--batches 1,8,32,128] [--prefill 512,2048,8192]
//                     [--prompt 128]   (the decode requests' prompt length; e.g. 8192 to time long-context decode)
//                     [--temperature 0]   (> 0: every request sampled at it, seeded: the unchained decode step)
//                     [--prefix-caching off]   (on: decode with the prefix cache's bookkeeping, the engine's
//                     default; its prefills hit the cache, so only the steady decode tok/s compares)
//
// Built by `scripts/gpu-check.sh prepare` into .gpu-out/bench_cuda_engine; run by scripts/gpu-bench.sh on the GPU
// machine. The JSON is rewritten after each workload, so a run cut short by a timeout still leaves what it measured.
// Exit code 0 when everything ran, 1 when a measurement failed, 2 without a usable GPU, 64 on bad arguments.
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_json.h"
#include "request_trace.h"
#include "vt_engine.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

const int kPrompt = 128, kNew = 256;
const uint64_t kSeed = 1;
const double kWaitSeconds = 300;  // one run that takes longer than this is taken as hung

double now_s() { return bench_now_s(); }

// splitmix64; bench/cuda_hf.py computes the same ids.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Request r's prompt: n ids in [0, 1000), the same in every run (r < 65536, n <= 65536).
std::vector<int32_t> prompt_ids(uint64_t seed, uint32_t r, int n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = int32_t(mix((seed << 32) + (uint64_t(r) << 16) + uint64_t(i)) % 1000);
  return ids;
}

json stat(std::vector<double> v) {
  json j;
  j["runs"] = v;
  if (v.empty()) return j;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  j["median"] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  j["min"] = v.front();
  j["max"] = v.back();
  return j;
}

using Trace = RequestTrace;

// The requests' temperature (--temperature; 0: greedy): a sampled decode step is not chained (Engine::step), so this
// times the step the way most chat requests run it.
float g_temperature = 0.f;

// Submits greedy (or sampled at g_temperature, seeded), no stop ids (so only max_tokens ends it); 0 and `err` set on
// failure.
uint64_t submit(vt_engine *e, Trace &t, const std::vector<int32_t> &ids, int max_tokens, std::string &err) {
  vt_request_params rp = vt_request_default_params();
  rp.max_tokens = max_tokens;
  rp.temperature = g_temperature;
  rp.seed = 1234, rp.has_seed = g_temperature > 0.f;
  rp.n_stop_ids = 0;
  char buf[512] = {0};
  uint64_t id = 0;
  const double t0 = now_s();
  if (vt_engine_submit(e, ids.data(), int32_t(ids.size()), rp, &id, buf, sizeof buf) != VT_OK) {
    err = std::string("submit: ") + buf;
    return 0;
  }
  std::lock_guard<std::mutex> lock(t.mu);
  t.reqs[id].submit = t0;  // the callback may already have filled the rest of the entry
  return id;
}

// Submits the requests together, waits for them all and checks each made exactly `max_tokens`.
bool run_requests(vt_engine *e, Trace &t, const std::vector<std::vector<int32_t>> &prompts, int max_tokens,
                  std::vector<uint64_t> &ids, std::string &err) {
  t.reset();
  ids.clear();
  for (const auto &p : prompts) {
    const uint64_t id = submit(e, t, p, max_tokens, err);
    if (!id) return false;
    ids.push_back(id);
  }
  if (!t.wait_all(ids, kWaitSeconds)) {
    err = "requests did not finish within " + std::to_string(int(kWaitSeconds)) + " s";
    return false;
  }
  std::lock_guard<std::mutex> lock(t.mu);
  for (uint64_t id : ids) {
    const Trace::Req &r = t.reqs[id];
    if (r.finish != VT_FINISH_LENGTH || r.tokens != max_tokens) {
      err = "request " + std::to_string(id) + " finished with " + std::to_string(r.finish) + " after " +
            std::to_string(r.tokens) + " tokens (want " + std::to_string(max_tokens) + ")" +
            (r.message.empty() ? "" : ": " + r.message);
      return false;
    }
  }
  return true;
}

struct Options {
  std::string model, json_path, dtype = "bfloat16", device = "cuda";
  int runs = 3;
  bool graphs = true, dedup = false, first_use = false, decode = true, prefill = true, load = true;
  bool prefix_caching = false;  // --prefix-caching on: the cache's bookkeeping in the decode figures (see main)
  std::vector<int> batches{1, 8, 32, 128}, prefills{512, 2048, 8192};
  int prompt = kPrompt;  // --prompt: the decode requests' prompt length (long contexts: the decode attention)
};

std::vector<int> int_list(const char *s) {
  std::vector<int> v;
  for (const char *p = s; *p;) {
    char *end = nullptr;
    const long x = std::strtol(p, &end, 10);
    if (end == p || x <= 0) return {};
    v.push_back(int(x));
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return {};
  }
  return v;
}

// Reads every regular file of the folder once, so loads see a warm page cache; returns {bytes, seconds}.
std::pair<int64_t, double> warm_page_cache(const std::string &dir) {
  const double t0 = now_s();
  int64_t total = 0;
  std::vector<char> buf(size_t(16) << 20);
  for (const auto &f : fs::directory_iterator(dir)) {
    if (!f.is_regular_file()) continue;
    const int fd = ::open(f.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += n;
    ::close(fd);
  }
  return {total, now_s() - t0};
}

struct Bench {
  Options o;
  vt_engine_params params{};
  json out;
  int failures = 0;

  void save() const {
    if (o.json_path.empty()) return;
    std::ofstream(o.json_path) << out.dump(2) << "\n";
  }
  void fail(const std::string &where, const std::string &err) {
    ++failures;
    out["errors"].push_back(where + ": " + err);
    std::printf("FAIL %s: %s\n", where.c_str(), err.c_str());
  }

  // When each load stage was first reported, in seconds since now_s()'s origin (the last load's).
  std::vector<std::pair<std::string, double>> stages;
  static void on_progress(float, const char *stage, void *user) {
    auto &v = *static_cast<std::vector<std::pair<std::string, double>> *>(user);
    if (v.empty() || v.back().first != stage) v.emplace_back(stage, now_s());
  }

  vt_engine *load_engine(std::string &err) {
    vt_engine *e = nullptr;
    char buf[1024] = {0};
    stages.clear();
    vt_engine_params p = params;
    p.progress = &Bench::on_progress;
    p.progress_user = &stages;
    const vt_status st = vt_engine_load(o.model.c_str(), p, &e, buf, sizeof buf);
    if (st != VT_OK) {
      err = std::string(vt_status_name(st)) + ": " + buf;
      return nullptr;
    }
    return e;
  }

  void bench_decode(vt_engine *e, Trace &t, int B) {
    std::vector<std::vector<int32_t>> prompts;
    for (int r = 0; r < B; ++r) prompts.push_back(prompt_ids(kSeed, uint32_t(r), o.prompt));
    std::vector<uint64_t> ids;
    std::string err;
    const std::string where = "decode b" + std::to_string(B);
    if (!run_requests(e, t, prompts, 16, ids, err)) return fail(where + " warm-up", err);
    std::vector<double> tok_s, itl_ms, e2e;
    for (int k = 0; k < o.runs; ++k) {
      const double t0 = now_s();
      if (!run_requests(e, t, prompts, kNew, ids, err)) return fail(where, err);
      std::lock_guard<std::mutex> lock(t.mu);
      double last_first = 0, last_final = 0;
      for (uint64_t id : ids) {
        last_first = std::max(last_first, t.reqs[id].first);
        last_final = std::max(last_final, t.reqs[id].final);
      }
      int64_t steady = 0;
      for (const auto &[when, n] : t.steps)
        if (when > last_first) steady += n;
      tok_s.push_back(double(steady) / (last_final - last_first));
      e2e.push_back(double(B) * kNew / (last_final - t0));
      if (B == 1) {
        const Trace::Req &r = t.reqs[ids[0]];
        itl_ms.push_back(1e3 * (r.last - r.first) / (r.tokens - 1));
      }
    }
    json j;
    j["batch"] = B;
    j["prompt"] = o.prompt;
    j["new_tokens"] = kNew;
    j["tok_s"] = stat(tok_s);
    j["e2e_tok_s"] = stat(e2e);  // B x 256 over submit -> last final event, prefill included
    if (B == 1) j["itl_ms"] = stat(itl_ms);
    out["decode"][std::to_string(B)] = j;
    std::printf("decode  b%-4d %9.1f tok/s (min %.1f, max %.1f)", B, j["tok_s"]["median"].get<double>(),
                j["tok_s"]["min"].get<double>(), j["tok_s"]["max"].get<double>());
    if (B == 1) std::printf("  inter-token %.3f ms", j["itl_ms"]["median"].get<double>());
    std::printf("\n");
    save();
  }

  void bench_prefill(vt_engine *e, Trace &t, int P) {
    const std::vector<std::vector<int32_t>> prompts{prompt_ids(kSeed, 0, P)};
    std::vector<uint64_t> ids;
    std::string err;
    const std::string where = "prefill " + std::to_string(P);
    if (!run_requests(e, t, prompts, 1, ids, err)) return fail(where + " warm-up", err);
    std::vector<double> ttft_ms, tok_s;
    for (int k = 0; k < o.runs; ++k) {
      if (!run_requests(e, t, prompts, 1, ids, err)) return fail(where, err);
      std::lock_guard<std::mutex> lock(t.mu);
      const Trace::Req &r = t.reqs[ids[0]];
      const double s = r.first - r.submit;
      ttft_ms.push_back(1e3 * s);
      tok_s.push_back(P / s);
    }
    json j;
    j["tokens"] = P;
    j["ttft_ms"] = stat(ttft_ms);
    j["tok_s"] = stat(tok_s);
    out["prefill"][std::to_string(P)] = j;
    std::printf("prefill %-5d %9.1f tok/s, TTFT %.2f ms (min %.2f, max %.2f)\n", P, j["tok_s"]["median"].get<double>(),
                j["ttft_ms"]["median"].get<double>(), j["ttft_ms"]["min"].get<double>(), j["ttft_ms"]["max"].get<double>());
    save();
  }

  void bench_load() {
    std::vector<double> first_ms, load_ms, warm_s;
    std::map<std::string, std::vector<double>> stage_ms;  // load start -> a stage's first report
    std::vector<std::string> stage_order;                 // as the first load reported them
    const std::vector<std::vector<int32_t>> prompts{prompt_ids(kSeed, 0, kPrompt)};
    for (int k = 0; k < o.runs; ++k) {
      warm_s.push_back(warm_page_cache(o.model).second);
      Trace t;
      std::string err;
      const double t0 = now_s();
      vt_engine *e = load_engine(err);
      if (!e) return fail("load", err);
      const double t1 = now_s();
      vt_engine_set_step_callback(e, &Trace::on_step, &t);
      std::vector<uint64_t> ids;
      const bool ok = run_requests(e, t, prompts, 1, ids, err);
      double first = 0;
      if (ok) {
        std::lock_guard<std::mutex> lock(t.mu);
        first = t.reqs[ids[0]].first;
      }
      if (ok && !out.contains("memory")) record_engine(e);  // --only load: no other engine reported it
      vt_engine_free(e);
      if (!ok) return fail("load", err);
      first_ms.push_back(1e3 * (first - t0));
      load_ms.push_back(1e3 * (t1 - t0));
      for (const auto &[stage, at] : stages) {
        if (!stage_ms.count(stage)) stage_order.push_back(stage);
        stage_ms[stage].push_back(1e3 * (at - t0));
      }
    }
    json &j = out["load"];
    j["to_first_token_ms"] = stat(first_ms);
    j["load_ms"] = stat(load_ms);
    j["page_cache_reread_s"] = warm_s;
    // Where the load's time goes: when each progress stage began (the last ends at "ready").
    for (const std::string &stage : stage_order) j["stage_start_ms"][stage] = stat(stage_ms[stage]);
    std::printf("load -> first token %9.1f ms (min %.1f, max %.1f; vt_engine_load alone %.1f ms)\n",
                j["to_first_token_ms"]["median"].get<double>(), j["to_first_token_ms"]["min"].get<double>(),
                j["to_first_token_ms"]["max"].get<double>(), j["load_ms"]["median"].get<double>());
    std::printf("load stages (start, ms):");
    for (const std::string &stage : stage_order)
      std::printf(" %s %.1f", stage.c_str(), j["stage_start_ms"][stage]["median"].get<double>());
    std::printf("\n");
    save();
  }

  void record_engine(vt_engine *e) {
    vt_model_info info{};
    vt_engine_model_info(e, &info);
    vt_memory_report m{};
    vt_engine_memory(e, &m);
    out["model"] = {{"architecture", info.architecture}, {"device", info.device}, {"weight_dtype", info.dtype},
                    {"hidden_size", info.hidden_size}, {"n_layers", info.n_layers}, {"n_heads", info.n_heads},
                    {"n_kv_heads", info.n_kv_heads}, {"head_dim", info.head_dim}, {"vocab_size", info.vocab_size},
                    {"n_params", info.n_params}, {"weight_bytes", info.weight_bytes}, {"max_context", info.max_context}};
    out["memory"] = {{"weight_device_bytes", m.weight_device_bytes}, {"kv_cache_bytes", m.kv_cache_bytes},
                     {"kv_blocks_total", m.kv_blocks_total}, {"workspace_bytes", m.workspace_bytes},
                     {"graphs_count", m.graphs_count}, {"graphs_bytes", m.graphs_bytes},
                     {"host_pinned_bytes", m.host_pinned_bytes}};
    std::printf("model: %s on %s, %d layers, hidden %d, %lld params, %.3f GB of %s weights\n", info.architecture,
                info.device, info.n_layers, info.hidden_size, (long long)info.n_params, info.weight_bytes / 1e9, info.dtype);
    std::printf("memory after load: weights on device %.1f MiB, KV %.1f MiB (%d blocks of %d), workspace %.1f MiB, "
                "graphs %d (%lld B), pinned host %.1f MiB\n",
                m.weight_device_bytes / 1048576.0, m.kv_cache_bytes / 1048576.0, m.kv_blocks_total, m.kv_block_size,
                m.workspace_bytes / 1048576.0, m.graphs_count, (long long)m.graphs_bytes,
                m.host_pinned_bytes / 1048576.0);
    save();
  }
};

int usage() {
  std::fprintf(stderr,
               "usage: bench_cuda_engine --model DIR [--runs 3] [--dtype bfloat16|float32] [--graphs on|off] [--dedup on|off] [--capture load|first-use] [--json FILE]\n"
               "                         [--only decode,prefill,load] [--batches 1,8,32,128] [--prefill 512,2048,8192]\n"
               "                         [--prompt 128] [--temperature 0] [--prefix-caching off]\n"
               "                         [--device cuda|cpu]   (cpu: to check this harness on a machine without a GPU)\n");
  return 64;
}

}  // namespace

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Bench b;
  Options &o = b.o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return usage();
    ++i;
    if (a == "--model") o.model = v;
    else if (a == "--json") o.json_path = v;
    else if (a == "--runs") o.runs = std::max(1, std::atoi(v));
    else if (a == "--dtype" && (!std::strcmp(v, "bfloat16") || !std::strcmp(v, "float32"))) o.dtype = v;
    else if (a == "--device" && (!std::strcmp(v, "cuda") || !std::strcmp(v, "cpu"))) o.device = v;  // cpu: checks this harness without a GPU
    else if (a == "--graphs" && (!std::strcmp(v, "on") || !std::strcmp(v, "off"))) o.graphs = !std::strcmp(v, "on");
    else if (a == "--dedup" && (!std::strcmp(v, "on") || !std::strcmp(v, "off"))) o.dedup = !std::strcmp(v, "on");
    else if (a == "--prefix-caching" && (!std::strcmp(v, "on") || !std::strcmp(v, "off")))
      o.prefix_caching = !std::strcmp(v, "on");
    else if (a == "--capture" && (!std::strcmp(v, "load") || !std::strcmp(v, "first-use")))
      o.first_use = !std::strcmp(v, "first-use");
    else if (a == "--batches" && !(o.batches = int_list(v)).empty()) {}
    else if (a == "--prefill" && !(o.prefills = int_list(v)).empty()) {}
    else if (a == "--prompt" && std::atoi(v) >= 1 && std::atoi(v) <= 65536) o.prompt = std::atoi(v);
    else if (a == "--temperature" && std::atof(v) >= 0.0 && std::atof(v) <= 2.0) g_temperature = float(std::atof(v));
    else if (a == "--only") {
      const std::string s = std::string(",") + v + ",";
      o.decode = s.find(",decode,") != std::string::npos;
      o.prefill = s.find(",prefill,") != std::string::npos;
      o.load = s.find(",load,") != std::string::npos;
      if (!o.decode && !o.prefill && !o.load) return usage();
    } else return usage();
  }
  if (o.model.empty()) return usage();

  // The same params whatever subset runs (so the graphs-off control differs from the full run in graphs alone):
  // room for the default workload, or for larger --batches / --prefill.
  const int max_batch = std::max(128, *std::max_element(o.batches.begin(), o.batches.end()));
  const int max_prefill = std::max(8192, *std::max_element(o.prefills.begin(), o.prefills.end()));
  vt_engine_params &p = b.params;
  p = vt_engine_default_params();
  p.device = o.device == "cpu" ? VT_DEVICE_CPU : VT_DEVICE_CUDA;
  p.dtype = o.dtype == "bfloat16" ? VT_DTYPE_BFLOAT16 : VT_DTYPE_FLOAT32;
  p.max_context = std::max(max_prefill, o.prompt) + kNew;
  p.max_seqs = max_batch;
  p.max_batch_tokens = max_prefill;
  p.cuda_graphs.enabled = o.graphs ? 1 : 0;
  p.cuda_graphs.dedup = o.dedup ? 1 : 0;
  p.cuda_graphs.first_use = o.first_use ? 1 : 0;
  // Every measurement repeats its prompts after an untimed warm-up: with the prefix cache on, a prefill or time to
  // first token would time a cache hit. This benchmark times the computation (bench/prefix-cache.mjs times the cache).
  // --prefix-caching on (the engine's default) measures what its bookkeeping costs the decode steps: only the steady
  // decode figure (after the last first token) means anything then.
  p.prefix_caching = o.prefix_caching ? 1 : -1;
  // The KV pool: every decode request's prompt + new tokens in whole blocks (one spare block each), or one
  // max_context sequence, whichever is more. The bytes per token come from the engine's own plan.
  vt_memory_estimate est{};
  char err[1024] = {0};
  const vt_status st = vt_engine_estimate(o.model.c_str(), p, &est, err, sizeof err);
  if (st != VT_OK) {
    std::printf("estimate failed: %s: %s\n", vt_status_name(st), err);
    return 1;
  }
  const int64_t per_token = est.kv_cache_bytes / std::max<int64_t>(est.kv_cache_tokens, 1);
  const int64_t block = 16;  // kv_block_size 0 = 16
  const int64_t per_seq = ((o.prompt + kNew + block - 1) / block + 1) * block;
  // A --prompt other than the default sizes the pool for the decode batches asked for, not max_seqs of them (128
  // sequences of 8k keys would not fit); the default workload keeps max_seqs, the same pool for every subset.
  const int kv_seqs = o.prompt == kPrompt ? p.max_seqs : *std::max_element(o.batches.begin(), o.batches.end());
  const int64_t tokens = std::max<int64_t>(int64_t(kv_seqs) * per_seq, (p.max_context + block - 1) / block * block);
  p.kv_cache_bytes = tokens * per_token;

  json &out = b.out;
  out["tool"] = "bench_cuda_engine";
  out["engine"] = "vtengine";
  out["meta"] = bench_meta();
  out["date"] = bench_date();
  out["model_dir"] = o.model;
  out["dtype"] = o.dtype;
  out["graphs"] = o.graphs;
  out["graphs_dedup"] = o.dedup;
  out["graphs_capture"] = o.first_use ? "first-use" : "load";
  out["workload"] = {{"prompt", o.prompt}, {"temperature", g_temperature}, {"new_tokens", kNew}, {"seed", kSeed}, {"ids_below", 1000}, {"runs", o.runs},
                     {"batches", o.batches}, {"prefill", o.prefills}};
  const std::vector<int32_t> head = prompt_ids(kSeed, 0, o.prompt);
  out["workload"]["prompt0_head"] = std::vector<int32_t>(head.begin(), head.begin() + 8);  // cuda_hf.py's must match
  out["params"] = {{"device", o.device}, {"dtype", o.dtype}, {"max_context", p.max_context}, {"max_seqs", p.max_seqs},
                   {"max_batch_tokens", p.max_batch_tokens}, {"kv_block_size", block}, {"kv_cache_bytes", p.kv_cache_bytes},
                   {"kv_cache_tokens", tokens}, {"cuda_graphs_enabled", p.cuda_graphs.enabled}};
  out["errors"] = json::array();
  std::printf("bench_cuda_engine: %s, dtype %s, graphs %s, %d run(s) each\n", o.model.c_str(), o.dtype.c_str(),
              o.graphs ? "on" : "off", o.runs);
  std::printf("params: device %s, max_context %d, max_seqs %d, max_batch_tokens %d, kv_block_size %lld, "
              "kv_cache_bytes %lld (%lld tokens x %lld B)\n",
              o.device.c_str(), p.max_context, p.max_seqs, p.max_batch_tokens, (long long)block, (long long)p.kv_cache_bytes,
              (long long)tokens, (long long)per_token);

  const auto [warm_bytes, warm_s] = warm_page_cache(o.model);
  out["page_cache"] = {{"bytes", warm_bytes}, {"seconds", warm_s}};
  std::printf("page cache: read %.2f GB of %s in %.1f s (%.2f GB/s)\n", warm_bytes / 1e9, o.model.c_str(), warm_s,
              warm_bytes / 1e9 / std::max(warm_s, 1e-9));

  if (o.decode || o.prefill) {
    std::string lerr;
    const double t0 = now_s();
    vt_engine *e = b.load_engine(lerr);
    if (!e) {
      std::printf("load failed: %s\n", lerr.c_str());
      b.out["errors"].push_back("load: " + lerr);
      b.save();
      return lerr.rfind("ERR_NO_GPU", 0) == 0 ? 2 : 1;
    }
    out["first_load_s"] = now_s() - t0;
    std::printf("loaded in %.2f s\n", now_s() - t0);
    Trace t;
    vt_engine_set_step_callback(e, &Trace::on_step, &t);
    b.record_engine(e);
    // Prefill first: it is quick, and a timeout during the long decode runs then still leaves its figures.
    if (o.prefill)
      for (int P : o.prefills) b.bench_prefill(e, t, P);
    if (o.decode)
      for (int B : o.batches) b.bench_decode(e, t, B);
    vt_engine_free(e);
  }
  if (o.load) b.bench_load();
  b.save();
  std::printf("bench_cuda_engine: %s\n", b.failures ? "FAILED (see FAIL lines)" : "done");
  return b.failures ? 1 : 0;
}
