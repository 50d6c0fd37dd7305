#include "loader/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "loader/json_fields.h"
#include "status.h"

namespace vt {

using nlohmann::json;

namespace {

struct DtypeBits {
  const char *name;
  int bits;
};

// Every dtype of the safetensors format (safetensors 0.6: Dtype and its bitsize()). An unknown name is an error of
// its own (ERR_UNSUPPORTED_DTYPE): without its size the offsets cannot be checked.
constexpr DtypeBits kDtypes[] = {
    {"BOOL", 8},    {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
    {"F8_E5M2", 8}, {"F8_E4M3", 8},     {"F8_E8M0", 8},     {"I16", 16},    {"U16", 16}, {"F16", 16},
    {"BF16", 16},   {"I32", 32},        {"U32", 32},        {"F32", 32},    {"C64", 64}, {"F64", 64},
    {"I64", 64},    {"U64", 64},
};

// Strict UTF-8, as Rust's str::from_utf8 (which the library uses) accepts it: no overlong forms, no surrogates,
// nothing above U+10FFFF. Returns the offset of the first bad byte, or npos.
size_t first_invalid_utf8(std::string_view s) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) { ++i; continue; }
    int len;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return i;
    if (i + size_t(len) > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (int k = 2; k < len; ++k)
      if (p[i + size_t(k)] < 0x80 || p[i + size_t(k)] > 0xBF) return i;
    i += size_t(len);
  }
  return std::string_view::npos;
}

// Parses the header, refusing a key that repeats within one object (nlohmann, like most parsers, would keep the
// last one silently) and nesting deeper than a valid header ever goes (tensor -> field -> array is depth 3), so a
// hostile file cannot make the parser build a deep tree.
json parse_unique_keys(std::string_view text, const std::string &where) {
  struct Level {
    std::set<std::string> keys;
    std::string last;  // the key being read (names a duplicate's parent)
  };
  std::vector<Level> objects;
  std::string tensor;  // the top-level key being read
  auto on_event = [&](int depth, json::parse_event_t event, json &parsed) -> bool {
    if (depth > 3) fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header nests deeper than a header can");
    switch (event) {
      case json::parse_event_t::object_start: objects.emplace_back(); break;
      case json::parse_event_t::object_end: objects.pop_back(); break;
      case json::parse_event_t::key: {
        const std::string &key = parsed.get_ref<const std::string &>();
        if (objects.size() == 1) tensor = key;
        if (!objects.back().keys.insert(key).second) {
          if (objects.size() == 1)
            fail(VT_ERR_BAD_CHECKPOINT, where + ": tensor \"" + key + "\" appears twice in the safetensors header");
          fail(VT_ERR_BAD_CHECKPOINT, where + ": the safetensors header entry \"" + tensor + "\" has two \"" + key + "\" fields");
        }
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception &e) {
    fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header is not valid JSON: " + e.what());
  }
}

// A JSON non-negative integer as the library's usize fields read it (so no 2.0, no -1, no true).
bool as_u64(const json &v, uint64_t *out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

HeaderTensor read_entry(const std::string &name, const json &entry, uint64_t data_size, uint64_t data_start,
                        const std::string &where) {
  const std::string what = where + ": tensor \"" + name + "\"";
  if (!entry.is_object()) fail(VT_ERR_BAD_CHECKPOINT, what + " is " + describe_json(entry) + ", not an object");
  HeaderTensor t;
  t.name = name;

  auto dtype = entry.find("dtype");
  if (dtype == entry.end()) fail(VT_ERR_BAD_CHECKPOINT, what + " has no \"dtype\"");
  if (!dtype->is_string()) fail(VT_ERR_BAD_CHECKPOINT, what + ": \"dtype\" is " + describe_json(*dtype) + ", not a string");
  t.dtype = dtype->get<std::string>();
  const int bits = safetensors_dtype_bits(t.dtype);
  if (bits == 0)
    fail(VT_ERR_UNSUPPORTED_DTYPE, what + " has dtype \"" + t.dtype.substr(0, 40) +
                                       "\", which the safetensors format does not define (F32, F16, BF16, I64, ...)");

  auto shape = entry.find("shape");
  if (shape == entry.end()) fail(VT_ERR_BAD_CHECKPOINT, what + " has no \"shape\"");
  if (!shape->is_array()) fail(VT_ERR_BAD_CHECKPOINT, what + ": \"shape\" is " + describe_json(*shape) + ", not an array");
  uint64_t numel = 1;
  bool overflow = false;
  for (const json &d : *shape) {
    uint64_t v = 0;
    if (!as_u64(d, &v) || v > uint64_t(INT64_MAX))
      fail(VT_ERR_BAD_CHECKPOINT, what + ": a \"shape\" dimension is " + describe_json(d) + ", not a non-negative integer");
    t.shape.push_back(int64_t(v));
    overflow = overflow || __builtin_mul_overflow(numel, v, &numel);
  }

  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end()) fail(VT_ERR_BAD_CHECKPOINT, what + " has no \"data_offsets\"");
  if (!offsets->is_array() || offsets->size() != 2 || !as_u64((*offsets)[0], &t.begin) || !as_u64((*offsets)[1], &t.end))
    fail(VT_ERR_BAD_CHECKPOINT, what + ": \"data_offsets\" must be [begin, end], two non-negative integers");
  if (t.end < t.begin)
    fail(VT_ERR_BAD_CHECKPOINT, what + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                                    "] end before they begin");
  if (t.end > data_size)
    fail(VT_ERR_TRUNCATED_CHECKPOINT, what + " needs bytes up to " + std::to_string(data_start + t.end) +
                                          " but the file has " + std::to_string(data_start + data_size) +
                                          " (truncated download?)");

  uint64_t nbits = 0;
  overflow = overflow || __builtin_mul_overflow(numel, uint64_t(bits), &nbits);
  if (overflow) fail(VT_ERR_BAD_CHECKPOINT, what + ": its shape's size overflows 64 bits");
  if (nbits % 8 != 0)
    fail(VT_ERR_BAD_CHECKPOINT, what + ": " + std::to_string(numel) + " elements of " + t.dtype + " do not fill whole bytes");
  const uint64_t want = nbits / 8, have = t.end - t.begin;
  if (have != want)
    fail(VT_ERR_BAD_CHECKPOINT, what + " has " + std::to_string(have) + " bytes (data_offsets [" + std::to_string(t.begin) +
                                    ", " + std::to_string(t.end) + "]) but its shape and dtype " + t.dtype + " need " +
                                    std::to_string(want));

  return t;
}

}  // namespace

int safetensors_dtype_bits(std::string_view dtype) {
  for (const auto &d : kDtypes)
    if (dtype == d.name) return d.bits;
  return 0;
}

void check_safetensors_header_length(uint64_t header_len, uint64_t file_size, const std::string &where) {
  if (file_size < 8)
    fail(VT_ERR_TRUNCATED_CHECKPOINT, where + " is " + std::to_string(file_size) + " bytes: too short for a safetensors header");
  if (header_len > kMaxSafetensorsHeaderBytes)
    fail(VT_ERR_BAD_CHECKPOINT, where + ": header length " + std::to_string(header_len) + " is over the safetensors limit of " +
                                    std::to_string(kMaxSafetensorsHeaderBytes) + " bytes (corrupt or not a safetensors file)");
  if (header_len > file_size - 8)
    fail(VT_ERR_BAD_CHECKPOINT, where + ": header length " + std::to_string(header_len) + " runs past the end of the " +
                                    std::to_string(file_size) + "-byte file (corrupt or not a safetensors file)");
}

SafetensorsHeader parse_safetensors_header(std::string_view header, uint64_t data_size, const std::string &where) {
  const uint64_t data_start = 8 + uint64_t(header.size());
  if (const size_t bad = first_invalid_utf8(header); bad != std::string_view::npos)
    fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header is not valid UTF-8 (byte " + std::to_string(8 + bad) + ")");
  // nlohmann stops at a NUL byte as if the text ended there, so "{}\0junk" would pass; no JSON text holds one.
  if (const size_t nul = header.find('\0'); nul != std::string_view::npos)
    fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header holds a NUL byte (byte " + std::to_string(8 + nul) + ")");
  if (header.empty() || header[0] != '{')
    fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header does not start with '{' (corrupt or not a safetensors file)");
  const json j = parse_unique_keys(header, where);
  if (!j.is_object()) fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header is not a JSON object");

  SafetensorsHeader out;
  for (const auto &[name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      if (!entry.is_object())
        fail(VT_ERR_BAD_CHECKPOINT, where + ": \"__metadata__\" is " + describe_json(entry) + ", not an object of strings");
      for (const auto &[key, value] : entry.items()) {
        if (!value.is_string())
          fail(VT_ERR_BAD_CHECKPOINT, where + ": \"__metadata__\" entry \"" + key + "\" is " + describe_json(value) + ", not a string");
        out.metadata.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    out.tensors.push_back(read_entry(name, entry, data_size, data_start, where));
  }

  // The tiling rule: in offset order, each tensor begins where the one before ends, the last at the data's end.
  std::sort(out.tensors.begin(), out.tensors.end(), [](const HeaderTensor &a, const HeaderTensor &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const HeaderTensor *prev = nullptr;
  for (const HeaderTensor &t : out.tensors) {
    const std::string range = "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
    if (t.begin < at)
      fail(VT_ERR_BAD_CHECKPOINT, where + ": tensor \"" + t.name + "\" (data_offsets " + range + ") overlaps \"" + prev->name +
                                      "\", which ends at " + std::to_string(at) + "; offsets must tile the data exactly");
    if (t.begin > at)
      fail(VT_ERR_BAD_CHECKPOINT, where + ": " + std::to_string(t.begin - at) + " bytes before tensor \"" + t.name +
                                      "\" (data_offsets " + range + ") belong to no tensor; offsets must tile the data exactly");
    at = t.end;
    prev = &t;
  }
  if (at != data_size)
    fail(VT_ERR_BAD_CHECKPOINT, where + ": the tensors end at data offset " + std::to_string(at) + " but the file has " +
                                    std::to_string(data_size) + " bytes of data; the last " + std::to_string(data_size - at) +
                                    " belong to no tensor");

  // Our rule, not the library's (see the header), checked after the library's so a file breaking both is told the
  // library's reason: an element wider than a byte starts on a multiple of its size in the file.
  for (const HeaderTensor &t : out.tensors) {
    const int bits = safetensors_dtype_bits(t.dtype);
    const uint64_t elem = uint64_t(bits) / 8;
    if (bits % 8 == 0 && elem > 1 && t.end > t.begin && (data_start + t.begin) % elem != 0)
      fail(VT_ERR_BAD_CHECKPOINT, where + ": tensor \"" + t.name + "\" starts at file offset " + std::to_string(data_start + t.begin) +
                                      ", not a multiple of its " + std::to_string(elem) + "-byte " + t.dtype +
                                      " elements; the engine reads weights in place and cannot use a misaligned tensor "
                                      "(re-save the checkpoint with the safetensors library, which aligns every tensor)");
  }
  return out;
}

}  // namespace vt
