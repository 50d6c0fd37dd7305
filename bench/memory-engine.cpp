// Our side of issue 5's memory benchmark on the GPU machine, where there is no Node: the engine through its C ABI,
// speaking bench/memory.py's phase protocol exactly as bench/memory_hf.py does, with the same workload and the
// same prompt ids (prompt() below = memory_hf.py's and bench/memory.mjs's), so the external sampler measures both
// sides alike:
//   load   vt_engine_load (vt_engine_estimate for the same folder and params runs first: a careful caller's step,
//          and the figure the estimate target is checked against);
//   serve  N requests of P prompt tokens submitted at once, greedy, no stop ids (so each makes exactly K tokens);
//          wait for all;
//   idle   IDLE ms of nothing, the engine still loaded.
// Then {"phase": "end", "info": {...}}: the params, the estimate, vt_engine_memory after load and after serving
// (plus the resident bytes of the checkpoint's mappings in this process, from /proc/self/smaps: the engine's
// weight_mapped_resident_bytes is mincore's answer, which counts the page cache whoever holds it, and the benchmark
// keeps the checkpoint warm), the engine's stats and the timings.
//
//   python3 bench/memory.py --label vtengine --out ours.json --
//       bench_memory_engine --model DIR [--device cuda|cpu] [--requests 4] [--prompt 512] [--new 128] [--idle-ms 1000]
//                           [--dtype bfloat16|float32] [--kv-cache-bytes N] [--max-seqs N] [--max-batch-tokens N]
//                           [--control]
//
// KV pool: by default sized for the workload, N x (P + K) tokens with each sequence rounded up to whole blocks, in
// the bytes per token of the estimate's plan (--kv-cache-bytes overrides it); max_context = P + K and max_seqs = N,
// so nothing else is sized for more than this workload. --control loads nothing (the null control: the process
// alone). Progress goes to stderr; stdout carries only the phase lines. Built by `scripts/gpu-check.sh prepare` into
// .gpu-out/bench_memory_engine; run by scripts/gpu-memory.sh. Exit code 0 when the workload ran, 1 when it failed,
// 2 without a usable GPU, 64 on bad arguments.
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
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_json.h"
#include "request_trace.h"
#include "vt_engine.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

const double kWaitSeconds = 300;  // serving that takes longer than this is taken as hung
const int kBlock = 16;            // kv_block_size, set explicitly so the pool sizing below knows it

double now_s() { return bench_now_s(); }

// The same ids as bench/memory_hf.py's prompt() and bench/memory.mjs's (64-bit: no overflow for any n we use).
std::vector<int32_t> prompt(int n, int vocab, int salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    ids[size_t(i)] = int32_t(((int64_t(i) + salt) * 7919 + int64_t(salt) * 104729) % (vocab - 10) + 5);
  return ids;
}

// Folds a prompt's ids into a running checksum, as memory_hf.py's prompt_checksum() does: the table then shows
// that both sides were fed the same ids.
int64_t prompt_checksum(int64_t sum, const std::vector<int32_t> &ids) {
  for (int32_t id : ids) sum = (sum * 31 + id) % 1000000007;
  return sum;
}

// Prints a phase line and, under the sampler (MEMORY_SAMPLER_ACK=1), waits for its answer: it has then taken the
// sample that closes the phase before this one.
void mark(const char *phase, const json *info = nullptr) {
  json m = {{"phase", phase}};
  if (info) m["info"] = *info;
  std::printf("%s\n", m.dump().c_str());
  std::fflush(stdout);
  const char *ack = std::getenv("MEMORY_SAMPLER_ACK");
  if (std::strcmp(phase, "end") != 0 && ack && !std::strcmp(ack, "1")) {
    std::string line;
    std::getline(std::cin, line);
  }
}

// Rss and Pss of this process's mappings of the checkpoint's files (/proc/self/smaps): the host copy of the weights
// this process holds, whatever the page cache holds for others.
json checkpoint_mappings(const std::string &dir) {
  std::error_code ec;
  const std::string prefix = fs::weakly_canonical(dir, ec).string() + "/";
  std::ifstream f("/proc/self/smaps");
  int64_t rss = 0, pss = 0, size = 0;
  int maps = 0;
  bool ours = false;
  for (std::string line; std::getline(f, line);) {
    const size_t colon = line.find(':');
    const bool field = colon != std::string::npos && colon < line.find(' ');  // "Rss:   12 kB"; headers start "addr-addr"
    if (!field) {
      const size_t slash = line.find('/');
      ours = slash != std::string::npos && line.compare(slash, prefix.size(), prefix) == 0;
      maps += ours;
      continue;
    }
    if (!ours) continue;
    const int64_t kb = std::strtoll(line.c_str() + colon + 1, nullptr, 10);
    if (!line.compare(0, colon, "Rss")) rss += kb * 1024;
    else if (!line.compare(0, colon, "Pss")) pss += kb * 1024;
    else if (!line.compare(0, colon, "Size")) size += kb * 1024;
  }
  return {{"mappings", maps}, {"sizeBytes", size}, {"rssBytes", rss}, {"pssBytes", pss}};
}

json memory_json(vt_engine *e, const std::string &dir) {
  vt_memory_report m{};
  vt_engine_memory(e, &m);
  return {{"weight_device_bytes", m.weight_device_bytes},
          {"weight_host_bytes", m.weight_host_bytes},
          {"weight_mapped_bytes", m.weight_mapped_bytes},
          {"weight_mapped_resident_bytes", m.weight_mapped_resident_bytes},  // mincore: page cache, anyone's
          {"kv_cache_bytes", m.kv_cache_bytes},
          {"kv_cache_resident_bytes", m.kv_cache_resident_bytes},
          {"kv_blocks_total", m.kv_blocks_total},
          {"kv_blocks_used", m.kv_blocks_used},
          {"kv_block_size", m.kv_block_size},
          {"workspace_bytes", m.workspace_bytes},
          {"graphs_count", m.graphs_count},
          {"graphs_bytes", m.graphs_bytes},
          {"host_pinned_bytes", m.host_pinned_bytes},
          {"checkpointMappings", checkpoint_mappings(dir)}};
}

json estimate_json(const vt_memory_estimate &e) {
  return {{"weight_bytes", e.weight_bytes},
          {"weight_device_bytes", e.weight_device_bytes},
          {"weight_host_bytes", e.weight_host_bytes},
          {"weight_mapped_bytes", e.weight_mapped_bytes},
          {"kv_cache_bytes", e.kv_cache_bytes},
          {"kv_cache_tokens", e.kv_cache_tokens},
          {"workspace_bytes", e.workspace_bytes},
          {"max_context", e.max_context},
          {"host_available_bytes", e.host_available_bytes},
          {"host_pinned_bytes", e.host_pinned_bytes}};
}

// The requests of the serve phase, as the step callback reports them.
using Requests = RequestTrace;

struct Options {
  std::string model, device = "cuda", dtype = "bfloat16";
  int requests = 4, prompt = 512, new_tokens = 128, idle_ms = 1000, max_seqs = 0, max_batch_tokens = 0;
  int64_t kv_cache_bytes = 0;
  bool control = false;
};

int usage() {
  std::fprintf(stderr,
               "usage: bench_memory_engine --model DIR [--device cuda|cpu] [--requests 4] [--prompt 512] [--new 128]\n"
               "                           [--idle-ms 1000] [--dtype bfloat16|float32] [--kv-cache-bytes N]\n"
               "                           [--max-seqs N] [--max-batch-tokens N] [--control]\n"
               "  run it under bench/memory.py, which reads the phases it prints\n");
  return 64;
}

bool parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--control") {
      o.control = true;
      continue;
    }
    const char *v = i + 1 < argc ? argv[++i] : nullptr;
    if (!v) return false;
    const long long x = std::atoll(v);
    if (a == "--model") o.model = v;
    else if (a == "--device" && (!std::strcmp(v, "cuda") || !std::strcmp(v, "cpu"))) o.device = v;
    else if (a == "--dtype" && (!std::strcmp(v, "bfloat16") || !std::strcmp(v, "float32"))) o.dtype = v;
    else if (a == "--requests" && x > 0) o.requests = int(x);
    else if (a == "--prompt" && x > 0) o.prompt = int(x);
    else if (a == "--new" && x > 0) o.new_tokens = int(x);
    else if (a == "--idle-ms" && x >= 0) o.idle_ms = int(x);
    else if (a == "--kv-cache-bytes" && x > 0) o.kv_cache_bytes = x;
    else if (a == "--max-seqs" && x > 0) o.max_seqs = int(x);
    else if (a == "--max-batch-tokens" && x > 0) o.max_batch_tokens = int(x);
    else return false;
  }
  return !o.model.empty();
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse(argc, argv, o)) return usage();
  const int N = o.requests, P = o.prompt, K = o.new_tokens;

  json info;
  info["engine"] = "vtengine";
  info["tool"] = "bench_memory_engine";
  info["device"] = o.device;
  info["control"] = o.control;
  info["workload"] = {{"requests", N}, {"prompt", P}, {"new", K}, {"idleMs", o.idle_ms}};
  info["meta"] = bench_meta();
  info["date"] = bench_date();
  info["errors"] = json::array();
  if (o.control) {  // as memory_hf.py --control: nothing loaded, the process's own footprint
    mark("serve");
    mark("idle");
    std::this_thread::sleep_for(std::chrono::milliseconds(o.idle_ms));
    mark("end", &info);
    return 0;
  }

  vt_engine_params p = vt_engine_default_params();
  p.device = o.device == "cpu" ? VT_DEVICE_CPU : VT_DEVICE_CUDA;
  p.dtype = o.dtype == "bfloat16" ? VT_DTYPE_BFLOAT16 : VT_DTYPE_FLOAT32;
  p.max_context = P + K;
  p.max_seqs = o.max_seqs > 0 ? o.max_seqs : N;
  p.max_batch_tokens = o.max_batch_tokens;  // 0 = the engine's default
  p.kv_block_size = kBlock;
  char err[1024] = {0};
  const double t_est = now_s();
  vt_memory_estimate est{};
  if (o.kv_cache_bytes == 0) {
    // The pool for this workload: every request's P + K tokens in whole blocks, in the plan's bytes per token.
    vt_status st = vt_engine_estimate(o.model.c_str(), p, &est, err, sizeof err);
    if (st != VT_OK) {
      std::fprintf(stderr, "estimate failed: %s: %s\n", vt_status_name(st), err);
      return 1;
    }
    const int64_t per_token = est.kv_cache_bytes / std::max<int64_t>(est.kv_cache_tokens, 1);
    const int64_t tokens = int64_t(N) * ((P + K + kBlock - 1) / kBlock) * kBlock;
    p.kv_cache_bytes = tokens * per_token;
    info["kvSizing"] = {{"rule", "requests x (prompt + new), each rounded up to whole blocks"}, {"tokens", tokens},
                        {"bytesPerToken", per_token}};
  } else {
    p.kv_cache_bytes = o.kv_cache_bytes;
    info["kvSizing"] = {{"rule", "--kv-cache-bytes"}};
  }
  // The estimate for exactly the params the engine is loaded with.
  vt_status st = vt_engine_estimate(o.model.c_str(), p, &est, err, sizeof err);
  if (st != VT_OK) {
    std::fprintf(stderr, "estimate failed: %s: %s\n", vt_status_name(st), err);
    return 1;
  }
  info["estimateSeconds"] = now_s() - t_est;
  info["estimate"] = estimate_json(est);
  info["params"] = {{"device", o.device}, {"dtype", o.dtype}, {"max_context", p.max_context}, {"max_seqs", p.max_seqs},
                    {"max_batch_tokens", p.max_batch_tokens}, {"kv_block_size", p.kv_block_size},
                    {"kv_cache_bytes", p.kv_cache_bytes}, {"cuda_graphs_enabled", p.cuda_graphs.enabled},
                    {"n_threads", p.n_threads}};
  std::fprintf(stderr, "bench_memory_engine: %s on %s, %d x %d + %d tokens; kv_cache_bytes %lld (%lld tokens planned)\n",
               o.model.c_str(), o.device.c_str(), N, P, K, (long long)p.kv_cache_bytes, (long long)est.kv_cache_tokens);

  mark("load");
  const double t_load = now_s();
  vt_engine *e = nullptr;
  st = vt_engine_load(o.model.c_str(), p, &e, err, sizeof err);
  if (st != VT_OK) {
    std::fprintf(stderr, "load failed: %s: %s\n", vt_status_name(st), err);
    info["errors"].push_back(std::string("load: ") + vt_status_name(st) + ": " + err);
    mark("end", &info);
    return st == VT_ERR_NO_GPU ? 2 : 1;
  }
  info["loadSeconds"] = now_s() - t_load;
  vt_model_info mi{};
  vt_engine_model_info(e, &mi);
  info["model"] = {{"architecture", mi.architecture}, {"device", mi.device}, {"weight_dtype", mi.dtype},
                   {"hidden_size", mi.hidden_size}, {"n_layers", mi.n_layers}, {"vocab_size", mi.vocab_size},
                   {"n_params", mi.n_params}, {"weight_bytes", mi.weight_bytes}, {"max_context", mi.max_context}};
  info["memory"]["afterLoad"] = memory_json(e, o.model);
  std::fprintf(stderr, "loaded in %.2f s\n", info["loadSeconds"].get<double>());

  mark("serve");
  Requests reqs;
  vt_engine_set_step_callback(e, &Requests::on_step, &reqs);
  vt_request_params rp = vt_request_default_params();
  rp.max_tokens = K;
  rp.temperature = 0.f;
  rp.n_stop_ids = 0;  // no stop ids: only max_tokens ends a request
  std::vector<uint64_t> ids;
  const double t_serve = now_s();
  bool ok = true;
  int64_t checksum = 0;
  for (int r = 0; r < N && ok; ++r) {
    const std::vector<int32_t> ids_r = prompt(P, mi.vocab_size, r);
    checksum = prompt_checksum(checksum, ids_r);
    if (r == 0) info["prompt0Head"] = std::vector<int32_t>(ids_r.begin(), ids_r.begin() + std::min(P, 8));
    uint64_t id = 0;
    if (vt_engine_submit(e, ids_r.data(), int32_t(ids_r.size()), rp, &id, err, sizeof err) != VT_OK) {
      info["errors"].push_back(std::string("submit: ") + err);
      ok = false;
    } else {
      ids.push_back(id);
    }
  }
  if (ok && !reqs.wait_all(ids, kWaitSeconds)) {
    info["errors"].push_back("requests did not finish within " + std::to_string(int(kWaitSeconds)) + " s");
    ok = false;
  }
  const double serve_s = now_s() - t_serve;
  int64_t generated = 0;
  double last_first = 0;
  {
    std::lock_guard<std::mutex> lock(reqs.mu);
    for (uint64_t id : ids) {
      const Requests::Req &q = reqs.reqs[id];
      generated += q.tokens;
      last_first = std::max(last_first, q.first - t_serve);
      if (q.done && (q.finish != VT_FINISH_LENGTH || q.tokens != K)) {
        info["errors"].push_back("request " + std::to_string(id) + " finished with " + std::to_string(q.finish) + " after " +
                                 std::to_string(q.tokens) + " tokens (want " + std::to_string(K) + ")" +
                                 (q.message.empty() ? "" : ": " + q.message));
        ok = false;
      }
    }
  }
  info["promptChecksum"] = checksum;  // memory_hf.py reports the same for its ids
  info["serveSeconds"] = serve_s;
  info["lastFirstTokenSeconds"] = last_first;  // submit -> the last request's first token
  info["generatedTokens"] = generated;
  vt_engine_stats stats{};
  vt_engine_stats_get(e, &stats);
  info["stats"] = {{"steps", stats.steps}, {"tokens_generated", stats.tokens_generated}, {"preemptions", stats.preemptions},
                   {"kv_blocks_total", stats.kv_blocks_total}, {"kv_cache_bytes", stats.kv_cache_bytes}};
  info["memory"]["afterServe"] = memory_json(e, o.model);
  std::fprintf(stderr, "served %lld tokens in %.2f s (%lld steps, %lld preemptions)%s\n", (long long)generated, serve_s,
               (long long)stats.steps, (long long)stats.preemptions, ok ? "" : ": FAILED");

  mark("idle");
  std::this_thread::sleep_for(std::chrono::milliseconds(o.idle_ms));
  mark("end", &info);
  vt_engine_free(e);
  return ok ? 0 : 1;
}
