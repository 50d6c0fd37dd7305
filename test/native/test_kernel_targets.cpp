// The embedded kernels' targets and what they run on (kernel_targets.h), and vt_system_info_get's invariants.
//  - fatbin_targets against nvcc itself: when nvcc is here (NVCC, PATH, /usr/local/cuda/bin), a tiny kernel is
//    compiled for known -gencode lists (plain, arch-specific "a", family "f", PTX, compressed) and the parsed list
//    must be exactly what was asked for. Without nvcc those cases are skipped, saying so.
//  - malformed bytes (garbage, every truncation of a real fatbin) are refused, never read past their end.
//  - kernel_code_for against CUDA's compatibility rule, written out here case by case for the release targets.
//  - vt_system_info_get on whatever machine this runs: consistent with itself and with cuda_available().
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cuda/driver.h"
#include "backend/cuda/kernel_images.h"
#include "backend/cuda/kernel_targets.h"
#include "check.h"
#include "vt_engine.h"

using vt::cuda::KernelCode;
using vt::cuda::KernelTarget;

static std::vector<KernelTarget> parse_names(const std::string &list) {
  std::vector<KernelTarget> out;
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(' ', at);
    if (end == std::string::npos) end = list.size();
    std::string n = list.substr(at, end - at);
    KernelTarget t;
    t.ptx = n.rfind("compute_", 0) == 0;
    std::string digits = n.substr(n.find('_') + 1);
    if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
      t.suffix = digits.back();
      digits.pop_back();
    }
    t.arch = std::atoi(digits.c_str());
    out.push_back(t);
    at = end + 1;
  }
  return out;
}

static std::string find_nvcc() {
  std::vector<std::string> c;
  if (const char *e = std::getenv("NVCC"); e && *e) c.push_back(e);
  c.push_back("nvcc");
  c.push_back("/usr/local/cuda/bin/nvcc");
  for (const std::string &n : c)
    if (std::system((n + " --version > /dev/null 2>&1").c_str()) == 0) return n;
  return "";
}

static std::vector<unsigned char> read_all(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Compiles the kernel with `gencodes`, parses the fatbin, and compares (as sets, in the parser's file order) with
// `expect`. Returns the bytes for the truncation checks.
static std::vector<unsigned char> check_nvcc_case(const std::string &nvcc, const std::string &dir, const std::string &label,
                                                  const std::string &flags, const std::string &expect) {
  const std::string out = dir + "/" + label + ".fatbin";
  const std::string cmd = nvcc + " -fatbin " + flags + " -o " + out + " " + dir + "/k.cu 2>&1";
  const int rc = std::system(cmd.c_str());
  record(rc == 0, "nvcc " + label, cmd);
  if (rc != 0) return {};
  std::vector<unsigned char> bytes = read_all(out);
  std::vector<KernelTarget> got;
  std::string err;
  const bool ok = vt::cuda::fatbin_targets(bytes.data(), bytes.size(), &got, &err);
  record(ok, "parse " + label, err);
  std::vector<KernelTarget> want = parse_names(expect);
  bool same = got.size() == want.size();
  for (const KernelTarget &w : want) {
    bool found = false;
    for (const KernelTarget &g : got) found = found || g == w;
    same = same && found;
  }
  record(same, "targets of " + label, "got '" + vt::cuda::target_list(got) + "', want '" + expect + "'");
  return bytes;
}

static void check_against_nvcc() {
  const std::string nvcc = find_nvcc();
  if (nvcc.empty()) {
    std::printf("skip: no nvcc here (set NVCC=...), the fatbin parser is checked on synthetic cases only\n");
    return;
  }
  char tmpl[] = "/tmp/vt-kernel-targets-XXXXXX";
  const char *dir = mkdtemp(tmpl);
  if (!dir) return record(false, "mkdtemp");
  std::ofstream(std::string(dir) + "/k.cu") << "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.f; }\n";
  const auto gen = [](const char *virt, const char *real) {
    return std::string(" -gencode=arch=") + virt + ",code=" + real;
  };
  const std::vector<unsigned char> release_like = check_nvcc_case(
      nvcc, dir, "release-like",
      gen("compute_80", "sm_80") + gen("compute_90a", "sm_90a") + gen("compute_120", "sm_120") +
          gen("compute_80", "compute_80"),
      "sm_80 sm_90a sm_120 compute_80");
  check_nvcc_case(nvcc, dir, "family", gen("compute_100f", "sm_100f") + gen("compute_100a", "sm_100a") + gen("compute_121", "sm_121"),
                  "sm_100f sm_100a sm_121");
  check_nvcc_case(nvcc, dir, "compressed",
                  "-Xfatbin=-compress-all" + gen("compute_86", "sm_86") + gen("compute_90a", "sm_90a") +
                      gen("compute_80", "compute_80"),
                  "sm_86 sm_90a compute_80");
  // Every proper prefix of a real fatbin: refused or read as fewer entries, never past its end (ASan would see).
  for (size_t n = 0; n < release_like.size(); n += 7) {
    std::vector<unsigned char> cut(release_like.begin(), release_like.begin() + long(n));
    std::vector<KernelTarget> got;
    std::string err;
    const bool ok = vt::cuda::fatbin_targets(cut.data(), cut.size(), &got, &err);
    if (ok && got.size() >= 4) record(false, "a fatbin cut to " + std::to_string(n) + " bytes still lists every entry");
  }
  std::system((std::string("rm -rf ") + dir).c_str());
}

static void check_garbage() {
  std::vector<KernelTarget> got;
  std::string err;
  CHECK(!vt::cuda::fatbin_targets(nullptr, 0, &got, &err));
  const unsigned char text[] = "this is not a fatbin, just some bytes of text";
  CHECK(!vt::cuda::fatbin_targets(text, sizeof text, &got, &err) && !err.empty());
  // A header whose size field claims more than there is.
  unsigned char lie[32] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  CHECK(!vt::cuda::fatbin_targets(lie, sizeof lie, &got, &err));
}

// CUDA C++ Programming Guide, "Binary Compatibility" and "Feature Availability": a cubin for X.y runs on X.z,
// z >= y; an sm_XYa cubin on X.Y alone; PTX for X.Y is compiled by the driver for X.Y and anything newer.
static void check_rule() {
  const std::vector<KernelTarget> release = parse_names("sm_80 sm_86 sm_89 sm_90a sm_100a sm_110 sm_120 sm_121 compute_80");
  struct Case {
    int cc;
    KernelCode::Kind kind;
    const char *target;
  };
  const Case cases[] = {
      {80, KernelCode::Cubin, "sm_80"},   {86, KernelCode::Cubin, "sm_86"},    {87, KernelCode::Cubin, "sm_86"},  // Orin
      {89, KernelCode::Cubin, "sm_89"},   {90, KernelCode::Cubin, "sm_90a"},   {100, KernelCode::Cubin, "sm_100a"},
      {103, KernelCode::Ptx, "compute_80"},  // B300: sm_100a is for 10.0 alone
      {110, KernelCode::Cubin, "sm_110"}, {120, KernelCode::Cubin, "sm_120"},  {121, KernelCode::Cubin, "sm_121"},
      {130, KernelCode::Ptx, "compute_80"}, {75, KernelCode::None, ""},       {61, KernelCode::None, ""},
  };
  for (const Case &c : cases) {
    const KernelCode k = vt::cuda::kernel_code_for(c.cc, release);
    record(k.kind == c.kind && (k.kind == KernelCode::None || k.target.name() == c.target),
           "code for cc " + std::to_string(c.cc), "got " + std::to_string(int(k.kind)) + " " + k.target.name());
  }
  // A development build of one arch-specific target and no PTX runs on that GPU alone.
  const std::vector<KernelTarget> dev = parse_names("sm_90a");
  CHECK(vt::cuda::kernel_code_for(90, dev).kind == KernelCode::Cubin);
  CHECK(vt::cuda::kernel_code_for(80, dev).kind == KernelCode::None);
  CHECK(vt::cuda::kernel_code_for(100, dev).kind == KernelCode::None);
  // Family cubins run on later GPUs of their major version; PTX "a" on its own GPU only.
  CHECK(vt::cuda::kernel_code_for(103, parse_names("sm_100f")).kind == KernelCode::Cubin);
  CHECK(vt::cuda::kernel_code_for(110, parse_names("sm_100f")).kind == KernelCode::None);
  CHECK(vt::cuda::kernel_code_for(100, parse_names("compute_90a")).kind == KernelCode::None);
  CHECK(vt::cuda::kernel_code_for(90, parse_names("compute_90a")).kind == KernelCode::Ptx);
  CHECK(vt::cuda::kernel_code_for(90, {}).kind == KernelCode::None);
}

static bool terminated(const char *s, size_t cap) { return std::memchr(s, '\0', cap) != nullptr; }

static void check_system_info() {
  vt_system_info si;
  char err[256] = "";
  CHECK(vt_system_info_get(nullptr, err, sizeof err) == VT_ERR_INVALID_OPTION);
  const vt_status st = vt_system_info_get(&si, err, sizeof err);
  record(st == VT_OK, "vt_system_info_get", err);
  if (st != VT_OK) return;
  CHECK(terminated(si.cpu_features, sizeof si.cpu_features) && terminated(si.auto_reason, sizeof si.auto_reason));
  CHECK(std::string(si.cpu_matmul_paths).find(si.cpu_matmul) != std::string::npos);
  CHECK(si.cpu_threads >= 1);
  CHECK(si.n_kernel_images == int32_t(vt::cuda::kernel_image_count));
  if (si.n_kernel_images == 0) CHECK(si.n_cuda_targets == 0 && si.kernels_problem[0] != '\0');
  const vt::cuda::Availability a = vt::cuda::cuda_available();
  CHECK(si.cuda_usable == (a.ok ? 1 : 0));
  CHECK(std::string(si.auto_device) == (a.ok ? "cuda" : "cpu"));
  CHECK(si.auto_reason[0] != '\0');
  if (!si.driver_found) CHECK(si.n_gpus == 0 && std::string(si.driver_problem).find("libcuda.so.1") != std::string::npos);
  for (int i = 0; i < si.n_gpus && i < VT_SYSINFO_MAX_GPUS; ++i) {
    const vt_gpu_info &g = si.gpus[i];
    CHECK((g.usable != 0) == (g.reason[0] == '\0'));
    CHECK((g.code == VT_GPU_CODE_NONE) == (g.code_target[0] == '\0'));
    if (si.n_kernel_images == 0) CHECK(!g.usable);
  }
  if (si.cuda_usable) CHECK(si.n_gpus > 0 && si.gpus[0].usable);
  std::string targets;
  for (int i = 0; i < si.n_cuda_targets; ++i) targets += std::string(i ? " " : "") + si.cuda_targets[i];
  std::printf("this machine: %s, matmul %s, %d kernel images (%s), driver %s %d, cuBLASLt %s, auto -> %s (%s)\n",
              si.cpu_arch, si.cpu_matmul, si.n_kernel_images, targets.c_str(), si.driver_found ? "found" : "absent",
              si.driver_version, si.cublaslt_found ? si.cublaslt_path : "absent", si.auto_device, si.auto_reason);
  for (int i = 0; i < si.n_gpus && i < VT_SYSINFO_MAX_GPUS; ++i) {
    const vt_gpu_info &g = si.gpus[i];
    std::printf("  gpu %d: %s, cc %d.%d, %.1f GiB, code %d %s, usable %d %s\n", i, g.name, g.cc_major, g.cc_minor,
                double(g.total_bytes) / (1ull << 30), int(g.code), g.code_target, g.usable, g.reason);
    // The H200 with a build that embeds sm_90a (the release targets, or a development build for it) must take it.
    const bool has_90a = targets.find("sm_90a") != std::string::npos;
    if (std::strstr(g.name, "H200") && has_90a) {
      CHECK(g.cc_major == 9 && g.cc_minor == 0 && g.code == VT_GPU_CODE_CUBIN && std::string(g.code_target) == "sm_90a");
      CHECK(g.usable && (i != 0 || std::string(si.auto_device) == "cuda"));
    }
  }
}

int main() {
  check_garbage();
  check_rule();
  check_against_nvcc();
  check_system_info();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
