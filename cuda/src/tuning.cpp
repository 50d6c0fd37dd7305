// The engine's switches, read from the environment (contract in tuning.h). env() below is the engine's only
// getenv: a new switch is a field of Tuning, read here, and named in the table of bench/README.md.
#include "tuning.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>

extern char **environ;

namespace vt {

namespace {

const char *env(const char *name) { return std::getenv(name); }

// Once per process and line: engines load again and again (tests, reloads); the first load says it.
void say_once(const std::string &line) {
  static std::mutex m;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(m);
  if (said.insert(line).second) std::fprintf(stderr, "vtengine: %s\n", line.c_str());
}

// "0" / "1": anything else is ignored, said once.
bool flag(const char *name, bool dflt) {
  const char *v = env(name);
  if (!v) return dflt;
  if (!std::strcmp(v, "0")) return false;
  if (!std::strcmp(v, "1")) return true;
  say_once(std::string(name) + "=" + v + " is not 0 or 1; ignored");
  return dflt;
}

// The variables the engine reads; any other VT_CUDA_* / VT_CPU_* is named once (mostly the null controls of
// settled A/B tests, deleted with their figures kept in bench/RESULTS.md).
constexpr const char *kKnown[] = {"VT_CUDA_CUBLASLT", "VT_CUDA_GEMM", "VT_CUDA_SAMPLE",  "VT_CUDA_PENALTIES", "VT_CUDA_ATTN",
                                  "VT_CUDA_SUBLAYER_F32", "VT_CUDA_SPLIT_KEYS", "VT_CUDA_SKIP",  "VT_CUDA_REPLAY", "VT_CUDA_GEMM_SHAPES", "VT_CUDA_GEMM_PDL",
                                  "VT_CPU_ISA",      "VT_CPU_SPIN_US",    "VT_CPU_KC"};

void name_unknown_switches() {
  for (char **e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    if (kv.rfind("VT_CUDA_", 0) != 0 && kv.rfind("VT_CPU_", 0) != 0) continue;
    const std::string name(kv.substr(0, kv.find('=')));
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char *k) { return name == k; }))
      say_once(name + " is not read by this build (a settled experiment's switch is gone: bench/RESULTS.md has "
                      "its figures; bench/README.md lists the switches)");
  }
}

#if defined(VT_EXPERIMENTS)
constexpr bool kExperiments = true;
#else
constexpr bool kExperiments = false;
#endif

// A timing-only switch: read in experiments builds, named and ignored elsewhere.
const char *experiment(const char *name) {
  const char *v = env(name);
  if (v && !kExperiments) {
    say_once(std::string(name) + " is a timing switch, read only by experiments builds (scripts/gpu-check.sh "
                                 "prepare); ignored");
    return nullptr;
  }
  return v;
}

unsigned parse_skip(const char *v) {
  std::string list = std::string(",") + v + ",";  // items apart by ',' or '+' (gpu-decode-ab.sh splits on ',')
  std::replace(list.begin(), list.end(), '+', ',');
  const std::pair<const char *, CudaSkip> names[] = {{"norm", kSkipNorm}, {"rope", kSkipRope}, {"attn", kSkipAttn},
                                                     {"qkv", kSkipQkv},   {"o", kSkipO},       {"mlp", kSkipMlp},
                                                     {"argmax", kSkipArgmax}};
  unsigned bits = 0;
  for (const auto &[name, bit] : names)
    if (list.find(std::string(",") + name + ",") != std::string::npos) bits |= bit;
  return bits;
}

}  // namespace

Tuning tuning_from_env() {
  Tuning t;
  CudaTuning &c = t.cuda;
  c.cublaslt = flag("VT_CUDA_CUBLASLT", true);
  if (const char *v = env("VT_CUDA_GEMM"); v && *v) {
    if (!std::strcmp(v, "cublaslt")) c.gemm = v;
    else say_once(std::string("VT_CUDA_GEMM=") + v + " is not cublaslt; ignored");
  }
  c.sample_on_device = flag("VT_CUDA_SAMPLE", true);
  // The device applies penalties only where it samples.
  c.penalties_on_device = flag("VT_CUDA_PENALTIES", true) && c.sample_on_device;
  c.sublayer_f32 = flag("VT_CUDA_SUBLAYER_F32", false);
  if (const char *v = env("VT_CUDA_ATTN"); v && *v) {
    if (!std::strcmp(v, "simple") || !std::strcmp(v, "noprefill")) c.attention = v;
    else say_once(std::string("VT_CUDA_ATTN=") + v + " is not simple or noprefill; ignored");
  }
  if (const char *v = experiment("VT_CUDA_SPLIT_KEYS")) {
    // Rounded up to a multiple of 64 keys (the default, the split's granule).
    const int64_t n = std::atoll(v);
    c.ops.split_keys = int(std::clamp<int64_t>((n + 63) / 64 * 64, 64, int64_t(1) << 16));
  }
  if (const char *v = experiment("VT_CUDA_SKIP")) c.skip = parse_skip(v);
  if (const char *v = experiment("VT_CUDA_REPLAY")) c.replays = std::clamp(std::atoi(v), 1, 16);
  if (const char *v = experiment("VT_CUDA_GEMM_SHAPES"); v && *v) c.gemm_shapes = v;
  if (const char *v = experiment("VT_CUDA_GEMM_PDL")) {
    c.gemm_pdl_mma = std::strcmp(v, "0") != 0;
    c.gemm_pdl_wgmma = c.gemm_pdl_mma && std::strcmp(v, "mma") != 0;
  }

  if (!c.cublaslt) say_once("VT_CUDA_CUBLASLT=0: cuBLASLt is never loaded");
  if (!c.gemm.empty()) say_once("VT_CUDA_GEMM=cublaslt: cuBLASLt serves the products it can take (the A/B baseline)");
  if (!c.sample_on_device) say_once("VT_CUDA_SAMPLE=0: sampled rows go to the host sampler");
  else if (!c.penalties_on_device) say_once("VT_CUDA_PENALTIES=0: rows with penalties or a logit bias go to the host sampler");
  if (c.sublayer_f32) say_once("VT_CUDA_SUBLAYER_F32=1: o/down outputs in fp32 (debugging)");
  if (!c.attention.empty()) say_once("VT_CUDA_ATTN=" + c.attention + " (debugging)");
  if (c.ops.split_keys != 64) say_once("VT_CUDA_SPLIT_KEYS: decode attention splits of at least " + std::to_string(c.ops.split_keys) + " keys");
  if (c.skip) say_once("VT_CUDA_SKIP leaves launches out of every layer: for timing only, the results are wrong");
  if (!c.gemm_pdl_wgmma) say_once(std::string("VT_CUDA_GEMM_PDL: ") + (c.gemm_pdl_mma ? "only the mma.sync GEMMs" : "none of our GEMMs") + " launched with programmatic dependent launch (timing)");
  if (c.replays > 1) say_once("VT_CUDA_REPLAY=" + std::to_string(c.replays) + " runs each captured decode step " + std::to_string(c.replays) + " times: for timing only");
  name_unknown_switches();
  return t;
}

std::string cpu_isa_env() {
  const char *v = env("VT_CPU_ISA");
  return v ? v : "";
}

int cpu_spin_us_env() {
  const char *v = env("VT_CPU_SPIN_US");
  return v ? std::max(0, int(std::strtol(v, nullptr, 10))) : -1;
}

int cpu_kc_env() {
  const char *v = env("VT_CPU_KC");
  return v ? int(std::max<long long>(0, std::strtoll(v, nullptr, 10))) : -1;
}

std::string cublaslt_path_env() {
  const char *v = env("VT_CUBLASLT_PATH");
  return v ? v : "";
}

}  // namespace vt
