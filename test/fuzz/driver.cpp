// A stand-in for libFuzzer's main, so the fuzz targets (test/fuzz/fuzz_*.cpp, each an LLVMFuzzerTestOneInput) build
// and run with g++ alone, under ASan + UBSan. No coverage feedback: it mutates the seed corpus at random — bit
// flips, byte edits, inserted/erased/copied ranges, dictionary tokens, nudged numbers — stacking mutations on the
// last input a fifth of the time, from a fixed RNG seed, so a run is repeatable. It takes libFuzzer's flags, so
// scripts/fuzz-parsers.sh calls both the same way:
//
//   fuzz_target [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N] [-dict=FILE] [-artifact_prefix=P] CORPUS_DIR...
//
// Like libFuzzer it provides LLVMFuzzerMutate and calls a target's LLVMFuzzerCustomMutator when there is one.
// When the target crashes (a sanitizer report, an uncaught exception, a signal), the input is written to
// <artifact_prefix>crash-input before the process dies. Prints "Done N runs in S second(s)" as libFuzzer does.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
    __attribute__((weak));
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

std::mt19937_64 g_rng;
std::vector<std::string> g_dict = {  // JSON's own tokens, and a few the parsers' rules turn on (-dict adds more)
    "{", "}", "[", "]", ",", ":", "\"", "null", "true", "false", "0", "-1", "1e308", "0.5", "4294967296",
    "18446744073709551616", "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\\u0000", "\xc3\xa9"};

// The input being run, for the crash handlers (written with write(2) only: they may run inside a signal).
std::vector<uint8_t> g_current;
std::string g_artifact = "crash-input";

void dump_current() {
  const int fd = ::open(g_artifact.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current.size()) {
    const ssize_t n = ::write(fd, g_current.data() + done, g_current.size() - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  ::close(fd);
  const char msg[] = "\n== fuzz driver: the crashing input is in ";
  (void)!::write(2, msg, sizeof msg - 1);
  (void)!::write(2, g_artifact.c_str(), g_artifact.size());
  (void)!::write(2, "\n", 1);
}

void on_signal(int sig) {
  dump_current();
  signal(sig, SIG_DFL);
  raise(sig);
}

uint64_t pick(uint64_t n) { return n ? std::uniform_int_distribution<uint64_t>(0, n - 1)(g_rng) : 0; }

// Turns \xNN, \\ and \" of a libFuzzer dictionary value into bytes.
std::string unescape(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      if (s[i + 1] == 'x' && i + 3 < s.size()) {
        out += char(std::stoi(s.substr(i + 2, 2), nullptr, 16));
        i += 3;
      } else {
        out += s[++i];
      }
    } else {
      out += s[i];
    }
  }
  return out;
}

void load_dict(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find('"'), b = line.rfind('"');
    if (line.empty() || line[0] == '#' || a == std::string::npos || b <= a) continue;
    g_dict.push_back(unescape(line.substr(a + 1, b - a - 1)));
  }
}

const char *kNumbers[] = {"0", "1", "-1", "2", "3", "7", "8", "16", "255", "256", "65536", "2147483647", "2147483648",
                          "-2147483649", "4294967295", "9223372036854775807", "9223372036854775808", "1.5", "2.0", "-0",
                          "1e-9", "1e30", "1e308", "1e309", "0.0"};

// One mutation of v in place, keeping it within max_size.
void mutate_once(std::vector<uint8_t> &v, size_t max_size) {
  const int kind = int(pick(9));
  const size_t n = v.size();
  switch (kind) {
    case 0:  // flip a bit
      if (n) v[pick(n)] ^= uint8_t(1u << pick(8));
      break;
    case 1:  // a random byte
      if (n) v[pick(n)] = uint8_t(pick(256));
      break;
    case 2: {  // a byte JSON cares about
      static const char kBytes[] = "{}[],:\"\\0123456789-+.eE \n\t\x01\x7f\x80\xc0\xff";
      if (n) v[pick(n)] = uint8_t(kBytes[pick(sizeof kBytes - 1)]);
      break;
    }
    case 3: {  // insert random bytes
      const size_t k = 1 + pick(8);
      std::vector<uint8_t> bytes(k);
      for (auto &b : bytes) b = uint8_t(pick(256));
      v.insert(v.begin() + std::ptrdiff_t(pick(n + 1)), bytes.begin(), bytes.end());
      break;
    }
    case 4: {  // erase a range
      if (!n) break;
      const size_t at = pick(n), k = 1 + pick(std::min<size_t>(n - at, 32));
      v.erase(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + k));
      break;
    }
    case 5: {  // copy a range elsewhere (repeats a key, an entry, a field)
      if (!n) break;
      const size_t at = pick(n), k = 1 + pick(std::min<size_t>(n - at, 256));
      const std::vector<uint8_t> chunk(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + k));
      v.insert(v.begin() + std::ptrdiff_t(pick(n + 1)), chunk.begin(), chunk.end());
      break;
    }
    case 6: {  // a dictionary token, inserted or over a string's contents
      const std::string &tok = g_dict[pick(g_dict.size())];
      size_t at = pick(n + 1);
      if (n && pick(2)) {  // replace from `at` to the next quote, if one is near
        const auto q = std::find(v.begin() + std::ptrdiff_t(std::min(at, n)), v.end(), uint8_t('"'));
        if (q != v.end() && q - v.begin() - std::ptrdiff_t(at) < 64) v.erase(v.begin() + std::ptrdiff_t(at), q);
      }
      v.insert(v.begin() + std::ptrdiff_t(std::min(at, v.size())), tok.begin(), tok.end());
      break;
    }
    case 7:  // a whole number replaced by an interesting one
    case 8: {  // or nudged by a little
      if (!n) break;
      size_t at = pick(n);
      while (at < n && !(v[at] >= '0' && v[at] <= '9')) ++at;
      if (at == n) break;
      size_t end = at;
      while (end < n && ((v[end] >= '0' && v[end] <= '9') || v[end] == '.' || v[end] == 'e' || v[end] == '-')) ++end;
      while (at > 0 && v[at - 1] >= '0' && v[at - 1] <= '9') --at;
      std::string repl;
      if (kind == 7) {
        repl = kNumbers[pick(sizeof kNumbers / sizeof *kNumbers)];
      } else {
        const std::string old(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(end));
        // In unsigned arithmetic: strtoll saturates at the extremes, and the nudge must not overflow there.
        const uint64_t x = uint64_t(std::strtoll(old.c_str(), nullptr, 10)), d = 1 + pick(16);
        repl = std::to_string(int64_t(pick(2) ? x + d : x - d));
      }
      v.erase(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(end));
      v.insert(v.begin() + std::ptrdiff_t(at), repl.begin(), repl.end());
      break;
    }
  }
  if (v.size() > max_size) v.resize(max_size);
}

bool flag(const char *arg, const char *name, std::string *value) {
  const size_t k = std::strlen(name);
  if (std::strncmp(arg, name, k) != 0 || arg[k] != '=') return false;
  *value = arg + k + 1;
  return true;
}

}  // namespace

// libFuzzer's: mutates data[0, size) in place (data has room for max_size bytes); returns the new size.
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) {
  std::vector<uint8_t> v(data, data + size);
  const int times = 1 + int(pick(4));
  for (int i = 0; i < times; ++i) mutate_once(v, max_size);
  std::copy(v.begin(), v.end(), data);
  return v.size();
}

int main(int argc, char **argv) {
  uint64_t runs = UINT64_MAX, seed = 1;
  double seconds = 0;
  size_t max_len = 1 << 20;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (flag(argv[i], "-runs", &v)) runs = std::stoull(v);
    else if (flag(argv[i], "-max_total_time", &v)) seconds = std::stod(v);
    else if (flag(argv[i], "-seed", &v)) seed = std::stoull(v);
    else if (flag(argv[i], "-max_len", &v)) max_len = std::stoull(v);
    else if (flag(argv[i], "-dict", &v)) load_dict(v);
    else if (flag(argv[i], "-artifact_prefix", &v)) g_artifact = v + "crash-input";
    else if (argv[i][0] == '-') std::fprintf(stderr, "fuzz driver: ignoring %s\n", argv[i]);
    else dirs.push_back(argv[i]);
  }
  if (runs == UINT64_MAX && seconds <= 0) seconds = 10;
  g_rng.seed(seed);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, on_signal);
  std::set_terminate([] {  // an exception the target let through: an untyped error, so a crash
    dump_current();
    std::fputs("fuzz driver: uncaught exception\n", stderr);
    std::_Exit(1);
  });
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(dump_current);

  std::vector<std::vector<uint8_t>> seeds;
  for (const auto &d : dirs) {
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator(d, ec)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.size() <= max_len) seeds.push_back(std::move(bytes));
    }
  }
  std::sort(seeds.begin(), seeds.end());  // directory order varies between machines; runs should not
  if (seeds.empty()) seeds.emplace_back();

  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  uint64_t done = 0;
  for (const auto &s : seeds) {  // every seed as it is, first
    g_current = s;
    LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
    ++done;
  }
  std::fprintf(stderr, "fuzz driver: %zu seeds ran; mutating (seed %llu)\n", seeds.size(), (unsigned long long)seed);
  // One buffer of max_len for the whole run, as libFuzzer has: allocating a megabyte per input would cost more
  // (under ASan) than running it.
  std::vector<uint8_t> last = seeds[0], buf(max_len);
  while (done < runs && (seconds <= 0 || elapsed() < seconds)) {
    const std::vector<uint8_t> &base = pick(5) == 0 ? last : seeds[pick(seeds.size())];
    const size_t size = std::min(base.size(), max_len);
    std::copy(base.begin(), base.begin() + std::ptrdiff_t(size), buf.begin());
    const size_t n = LLVMFuzzerCustomMutator ? LLVMFuzzerCustomMutator(buf.data(), size, max_len, unsigned(g_rng()))
                                             : LLVMFuzzerMutate(buf.data(), size, max_len);
    g_current.assign(buf.begin(), buf.begin() + std::ptrdiff_t(std::min(n, max_len)));
    LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
    last = g_current;
    ++done;
  }
  std::fprintf(stderr, "Done %llu runs in %.0f second(s)\n", (unsigned long long)done, elapsed());
  return 0;
}
