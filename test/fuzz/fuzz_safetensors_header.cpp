// Fuzz target: a whole safetensors file (8-byte length, header, data) through the loader's checks, as
// Checkpoint::add_file runs them. Any outcome but success or a vt::Error of a checkpoint status is a crash: another
// exception escapes (untyped), a sanitizer report aborts, and an accepted header that breaks the format's
// invariants traps. Built by scripts/fuzz-parsers.sh, with libFuzzer (clang) or test/fuzz/driver.cpp (g++).
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "loader/safetensors_header.h"
#include "status.h"
#include "tally.h"

static FuzzTally g_tally;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

// What an accepted header promises the loader: ranges inside the data, in order, tiling it, each the size its
// shape and dtype say, names unique.
static void check_accepted(const vt::SafetensorsHeader &h, uint64_t data_size) {
  uint64_t at = 0;
  std::set<std::string> names;
  for (const auto &t : h.tensors) {
    if (t.begin != at || t.end < t.begin || t.end > data_size || !names.insert(t.name).second) __builtin_trap();
    uint64_t bits = uint64_t(vt::safetensors_dtype_bits(t.dtype));
    if (bits == 0) __builtin_trap();
    for (int64_t d : t.shape) {
      if (d < 0) __builtin_trap();
      bits *= uint64_t(d);  // cannot overflow: the parser checked the product
    }
    if (bits != (t.end - t.begin) * 8) __builtin_trap();
    at = t.end;
  }
  if (at != data_size) __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    uint64_t header_len = 0;
    if (size >= 8) std::memcpy(&header_len, data, 8);
    vt::check_safetensors_header_length(header_len, size, "fuzz.safetensors");
    const std::string_view header(reinterpret_cast<const char *>(data) + 8, size_t(header_len));
    const uint64_t data_size = size - 8 - header_len;
    check_accepted(vt::parse_safetensors_header(header, data_size, "fuzz.safetensors"), data_size);
    g_tally.add("accepted");
  } catch (const vt::Error &e) {
    const vt_status s = e.status();
    g_tally.add(status_name(s));
    if (s != VT_ERR_BAD_CHECKPOINT && s != VT_ERR_TRUNCATED_CHECKPOINT && s != VT_ERR_UNSUPPORTED_DTYPE) __builtin_trap();
    if (std::strstr(e.what(), "fuzz.safetensors") == nullptr) __builtin_trap();  // every message names the file
  }
  return 0;
}

// Mostly mutates the header alone and rewrites the length prefix to match, so mutants reach the JSON rules instead
// of all failing the length check; sometimes the whole file (prefix included), sometimes the data's length.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  uint64_t n = 0;
  if (size >= 8) std::memcpy(&n, data, 8);
  if (size < 8 || n > size - 8 || rng() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<uint8_t> rest(data + 8 + n, data + size);
  if (rng() % 8 == 0) rest.resize(rest.size() + (rng() % 2 ? 1 + rng() % 8 : 0) - std::min<size_t>(rest.size(), rng() % 2 ? 0 : 1 + rng() % 8));
  if (8 + rest.size() >= max_size) return LLVMFuzzerMutate(data, size, max_size);
  // Room for the header to grow by what one round of mutations adds (far less than max_size, which is a megabyte).
  const size_t room = std::min<size_t>(max_size - 8 - rest.size(), n + 4096);
  std::vector<uint8_t> header(std::max<size_t>(room, n));
  std::memcpy(header.data(), data + 8, n);
  const size_t hn = LLVMFuzzerMutate(header.data(), n, room);
  const uint64_t len = hn;
  std::memcpy(data, &len, 8);
  std::memcpy(data + 8, header.data(), hn);
  if (!rest.empty()) std::memcpy(data + 8 + hn, rest.data(), rest.size());
  return 8 + hn + rest.size();
}
