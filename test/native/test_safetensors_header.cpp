// parse_safetensors_header and check_safetensors_header_length: each rule of loader/safetensors_header.h on a
// hand-built header (the code and a word of the message it must give), then random valid headers that must pass
// and the same headers with one offset moved, which must not.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "check.h"
#include "loader/safetensors_header.h"
#include "status.h"

using vt::HeaderTensor;

namespace {

struct Entry {
  std::string name, dtype, shape;  // shape as JSON text: "[2, 2]"
  uint64_t begin, end;
};

std::string entry_json(const Entry &e) {
  return "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":" + e.shape + ",\"data_offsets\":[" +
         std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
}

// A header as writers lay it out: the entries in the order given, padded with spaces to a multiple of 8 so the data
// section starts aligned (8 + header length).
std::string header_of(const std::vector<Entry> &entries, const std::string &extra = "") {
  std::string h = "{";
  for (size_t i = 0; i < entries.size(); ++i) h += (i ? "," : "") + entry_json(entries[i]);
  if (!extra.empty()) h += (entries.empty() ? "" : ",") + extra;
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

struct Outcome {
  bool ok = false;
  vt_status status = VT_OK;
  std::string message;
  vt::SafetensorsHeader header;
};

Outcome parse(const std::string &header, uint64_t data_size) {
  Outcome o;
  try {
    o.header = vt::parse_safetensors_header(header, data_size, "m.safetensors");
    o.ok = true;
  } catch (const vt::Error &e) {
    o.status = e.status();
    o.message = e.what();
  }
  return o;
}

Outcome length(uint64_t header_len, uint64_t file_size) {
  Outcome o;
  try {
    vt::check_safetensors_header_length(header_len, file_size, "m.safetensors");
    o.ok = true;
  } catch (const vt::Error &e) {
    o.status = e.status();
    o.message = e.what();
  }
  return o;
}

// The case is refused with `status` and a message containing `word` (and naming the file).
void refused(const std::string &what, const Outcome &o, vt_status status, const std::string &word) {
  const bool good = !o.ok && o.status == status && o.message.find(word) != std::string::npos &&
                    o.message.find("m.safetensors") != std::string::npos;
  record(good, what, o.ok ? "accepted" : "status " + std::to_string(o.status) + ": " + o.message);
}

void accepted(const std::string &what, const Outcome &o) { record(o.ok, what, o.message); }

const vt_status BAD = VT_ERR_BAD_CHECKPOINT;

void test_valid() {
  // Entries out of offset order in the JSON: the library sorts by offset, so do we.
  auto o = parse(header_of({{"b", "BF16", "[3]", 16, 22}, {"a", "F32", "[2, 2]", 0, 16}}), 22);
  accepted("two tensors, listed out of order", o);
  CHECK(o.ok && o.header.tensors.size() == 2 && o.header.tensors[0].name == "a" && o.header.tensors[1].name == "b");
  CHECK(o.ok && o.header.tensors[1].begin == 16 && o.header.tensors[1].end == 22 && o.header.tensors[1].dtype == "BF16");
  CHECK(o.ok && o.header.tensors[0].shape == std::vector<int64_t>({2, 2}));
  accepted("no tensors, no data", parse("{}      ", 0));
  accepted("a scalar (shape [])", parse(header_of({{"s", "F64", "[]", 0, 8}}), 8));
  accepted("zero-size tensors share an offset", parse(header_of({{"z", "F32", "[0, 4]", 0, 0}, {"y", "BF16", "[0]", 0, 0},
                                                                {"a", "F32", "[1]", 0, 4}}), 4));
  o = parse(header_of({{"a", "U8", "[2]", 0, 2}}, "\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"}"), 2);
  accepted("__metadata__ of strings", o);
  CHECK(o.ok && o.header.metadata.size() == 2 && o.header.metadata[0].first == "format" && o.header.metadata[0].second == "pt");
  accepted("__metadata__ null", parse(header_of({{"a", "U8", "[2]", 0, 2}}, "\"__metadata__\":null"), 2));
  accepted("a UTF-8 name", parse(header_of({{"w\xc3\xa9ight \xe2\x82\xac", "I8", "[1]", 0, 1}}), 1));
  accepted("every dtype of the format", parse(header_of({{"a", "F64", "[1]", 0, 8}, {"b", "I64", "[1]", 8, 16},
                                                         {"c", "U64", "[1]", 16, 24}, {"d", "C64", "[1]", 24, 32},
                                                         {"e", "F32", "[1]", 32, 36}, {"f", "I32", "[1]", 36, 40},
                                                         {"g", "U32", "[1]", 40, 44}, {"h", "F16", "[1]", 44, 46},
                                                         {"i", "BF16", "[1]", 46, 48}, {"j", "I16", "[1]", 48, 50},
                                                         {"k", "U16", "[1]", 50, 52}, {"l", "U8", "[1]", 52, 53},
                                                         {"m", "I8", "[1]", 53, 54}, {"n", "BOOL", "[1]", 54, 55},
                                                         {"o", "F8_E4M3", "[1]", 55, 56}, {"p", "F8_E5M2", "[1]", 56, 57},
                                                         {"q", "F8_E8M0", "[1]", 57, 58}, {"r", "F4", "[2]", 58, 59},
                                                         {"s", "F6_E2M3", "[4]", 59, 62}, {"t", "F6_E3M2", "[4]", 62, 65}}),
                                               65));
  // Extra fields in an entry are ignored, as the library's serde struct ignores them.
  accepted("an unknown field in an entry",
           parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"note\":[1,2]}}", 1));
}

void test_dtype_bits() {
  CHECK(vt::safetensors_dtype_bits("F64") == 64 && vt::safetensors_dtype_bits("F32") == 32);
  CHECK(vt::safetensors_dtype_bits("BF16") == 16 && vt::safetensors_dtype_bits("F16") == 16);
  CHECK(vt::safetensors_dtype_bits("I64") == 64 && vt::safetensors_dtype_bits("I32") == 32 && vt::safetensors_dtype_bits("I16") == 16);
  CHECK(vt::safetensors_dtype_bits("I8") == 8 && vt::safetensors_dtype_bits("U8") == 8 && vt::safetensors_dtype_bits("BOOL") == 8);
  CHECK(vt::safetensors_dtype_bits("F8_E4M3") == 8 && vt::safetensors_dtype_bits("F8_E5M2") == 8);
  CHECK(vt::safetensors_dtype_bits("F4") == 4 && vt::safetensors_dtype_bits("F6_E3M2") == 6);
  CHECK(vt::safetensors_dtype_bits("f32") == 0 && vt::safetensors_dtype_bits("Q4_K") == 0 && vt::safetensors_dtype_bits("") == 0);
}

void test_length() {
  accepted("header fits", length(16, 100));
  accepted("header fills the file", length(92, 100));
  refused("file under 8 bytes", length(0, 7), VT_ERR_TRUNCATED_CHECKPOINT, "too short");
  refused("header past the end", length(93, 100), BAD, "header length 93");
  refused("header over 100 MB", length(100'000'001, 200'000'000), BAD, "limit");
  refused("header length 2^64-1", length(UINT64_MAX, 100), BAD, "header length");
}

void test_syntax() {
  refused("invalid UTF-8 (0xff)", parse("{\"a\xff\":1}     ", 0), BAD, "UTF-8");
  refused("overlong UTF-8 (C0 80)", parse("{\"a\xc0\x80\":1}    ", 0), BAD, "UTF-8");
  refused("UTF-8 surrogate (ED A0 80)", parse("{\"\xed\xa0\x80\":1}    ", 0), BAD, "UTF-8");
  refused("cut UTF-8 sequence", parse("{}\xe2\x82", 0), BAD, "UTF-8");
  refused("empty header", parse("", 0), BAD, "start with '{'");
  refused("leading space", parse(" {}", 0), BAD, "start with '{'");
  refused("not JSON", parse("{oops}  ", 0), BAD, "not valid JSON");
  refused("garbage after the object", parse("{}x     ", 0), BAD, "not valid JSON");
  refused("NUL padding", parse(std::string("{}\0\0\0\0\0\0", 8), 0), BAD, "NUL");
  refused("nested too deep", parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[[1]],\"data_offsets\":[0,1]}}", 1), BAD, "nests deeper");
  refused("a deep array", parse("{\"a\":" + std::string(10000, '[') + std::string(10000, ']') + "}", 0), BAD, "nests deeper");
  refused("entry not an object", parse("{\"a\":[1,2]}     ", 0), BAD, "not an object");
  refused("__metadata__ a string", parse(header_of({}, "\"__metadata__\":\"pt\""), 0), BAD, "__metadata__");
  refused("__metadata__ with a number", parse(header_of({}, "\"__metadata__\":{\"step\":3}"), 0), BAD, "step");
}

void test_entries() {
  refused("no dtype", parse("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1), BAD, "no \"dtype\"");
  refused("dtype a number", parse("{\"a\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}}", 1), BAD, "dtype");
  refused("unknown dtype", parse(header_of({{"a", "Q4_K", "[2]", 0, 2}}), 2), VT_ERR_UNSUPPORTED_DTYPE, "Q4_K");
  refused("lower-case dtype", parse(header_of({{"a", "f32", "[1]", 0, 4}}), 4), VT_ERR_UNSUPPORTED_DTYPE, "\"f32\"");
  refused("no shape", parse("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1), BAD, "no \"shape\"");
  refused("shape not a list", parse(header_of({{"a", "U8", "2", 0, 2}}), 2), BAD, "shape");
  refused("negative dimension", parse(header_of({{"a", "U8", "[-2]", 0, 2}}), 2), BAD, "dimension is -2");
  refused("fractional dimension", parse(header_of({{"a", "U8", "[2.0]", 0, 2}}), 2), BAD, "dimension is 2.0");
  refused("boolean dimension", parse(header_of({{"a", "U8", "[true]", 0, 1}}), 1), BAD, "dimension is true");
  refused("shape overflows 64 bits", parse(header_of({{"a", "F32", "[4294967296, 4294967296]", 0, 4}}), 4), BAD, "overflows");
  refused("shape x size overflows", parse(header_of({{"a", "F64", "[4611686018427387904]", 0, 8}}), 8), BAD, "overflows");
  refused("no data_offsets", parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1), BAD, "no \"data_offsets\"");
  refused("three offsets", parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1), BAD, "data_offsets");
  refused("a negative offset", parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1), BAD, "data_offsets");
  refused("offsets a string", parse("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":\"0,1\"}}", 1), BAD, "data_offsets");
  refused("end before begin", parse(header_of({{"a", "U8", "[0]", 4, 0}}), 4), BAD, "end before they begin");
  refused("bytes past the data", parse(header_of({{"a", "F32", "[4]", 0, 16}}), 12), VT_ERR_TRUNCATED_CHECKPOINT, "truncated");
  refused("byte length below shape x dtype", parse(header_of({{"a", "F32", "[2, 2]", 0, 12}}), 12), BAD, "need 16");
  refused("byte length above shape x dtype", parse(header_of({{"a", "BF16", "[3]", 0, 8}}), 8), BAD, "need 6");
  refused("F4 elements not filling a byte", parse(header_of({{"a", "F4", "[3]", 0, 2}}), 2), BAD, "whole bytes");
}

void test_duplicates() {
  // The same name twice, both valid and tiling: a parser keeping one would lose a tensor without a word.
  refused("a tensor named twice", parse("{" + entry_json({"a", "U8", "[2]", 0, 2}) + "," + entry_json({"a", "U8", "[2]", 2, 4}) + "}", 4),
          BAD, "\"a\" appears twice");
  refused("a field given twice",
          parse("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), BAD, "two \"dtype\"");
  refused("__metadata__ twice", parse("{\"__metadata__\":{},\"__metadata__\":{}}", 0), BAD, "appears twice");
  refused("a metadata key twice", parse("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0), BAD, "two \"k\"");
}

void test_tiling() {
  // The case: a tensor shifted back 2 bytes overlaps its neighbour (and the file ends 2 bytes early).
  refused("overlap by 2 bytes", parse(header_of({{"a", "F32", "[4]", 0, 16}, {"b", "F32", "[4]", 14, 30}}), 32), BAD, "overlaps \"a\"");
  refused("same range twice", parse(header_of({{"a", "F32", "[4]", 0, 16}, {"b", "F32", "[4]", 0, 16}}), 16), BAD, "overlaps");
  refused("a gap between tensors", parse(header_of({{"a", "F32", "[4]", 0, 16}, {"b", "F32", "[4]", 20, 36}}), 36), BAD, "4 bytes before tensor \"b\"");
  refused("first tensor not at 0", parse(header_of({{"a", "F32", "[1]", 4, 8}}), 8), BAD, "belong to no tensor");
  refused("bytes after the last tensor", parse(header_of({{"a", "F32", "[1]", 0, 4}}), 12), BAD, "last 8");
  refused("data but no tensors", parse("{}      ", 4), BAD, "belong to no tensor");
}

void test_alignment() {
  // The data starts at file offset 8 + header length: pad the header to put an F32 tensor 2 bytes off, then on.
  std::string f32 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  while ((8 + f32.size()) % 4 != 2) f32 += ' ';
  refused("F32 at a file offset 2 past a multiple of 4", parse(f32, 4), BAD, "multiple of its 4-byte");
  f32 += "  ";
  accepted("F32 at a multiple of 4", parse(f32, 4));
  // A tensor after an odd-sized byte tensor: allowed by the format, not by an engine that reads in place.
  refused("BF16 after 3 bytes", parse(header_of({{"a", "U8", "[3]", 0, 3}, {"b", "BF16", "[2]", 3, 7}}), 7), BAD, "\"b\" starts at file offset");
  accepted("U8 anywhere", parse(header_of({{"a", "U8", "[3]", 0, 3}, {"b", "I8", "[2]", 3, 5}}), 5));
  accepted("a zero-size F32 anywhere", parse(header_of({{"a", "U8", "[3]", 0, 3}, {"b", "F32", "[0]", 3, 3}, {"c", "U8", "[1]", 3, 4}}), 4));
}

// Random valid headers pass; moving any one offset of any tensor by a few bytes never does.
void test_random() {
  const char *dtypes[] = {"F32", "BF16", "F16", "I64", "U8"};
  const int sizes[] = {4, 2, 2, 8, 1};
  int passed = 0, refused_all = 0, trials = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<Entry> entries;
    uint64_t at = 0;
    const int n = 1 + int(below(8));
    int widest = 0;
    for (int i = 0; i < n; ++i) widest = std::max(widest, int(below(5)));
    for (int i = 0; i < n; ++i) {
      // Falling element size, as the library writes, so every tensor stays aligned.
      const int k = i == 0 ? widest : int(below(5));
      const int64_t d0 = below(5), d1 = 1 + below(6);
      const uint64_t bytes = uint64_t(d0 * d1 * sizes[k]);
      if (at % uint64_t(sizes[k]) != 0) continue;
      entries.push_back({"t" + std::to_string(i), dtypes[k], "[" + std::to_string(d0) + "," + std::to_string(d1) + "]", at, at + bytes});
      at += bytes;
    }
    std::vector<Entry> shuffled = entries;
    std::shuffle(shuffled.begin(), shuffled.end(), g_rng);
    const std::string h = header_of(shuffled);
    const Outcome o = parse(h, at);
    passed += o.ok;
    if (!o.ok) std::printf("random header refused: %s\n", o.message.c_str());
    // One offset moved: the tiling or the byte length breaks, or the data runs out.
    Entry &e = shuffled[size_t(below(int64_t(shuffled.size())))];
    const int64_t delta = below(2) ? 1 + below(4) : -(1 + below(4));
    uint64_t &field = below(2) ? e.begin : e.end;
    if (delta < 0 && field < uint64_t(-delta)) continue;
    field = uint64_t(int64_t(field) + delta);
    ++trials;
    refused_all += !parse(header_of(shuffled), at).ok;
  }
  record(passed == 300, "300 random valid headers accepted", std::to_string(passed));
  record(refused_all == trials, "every header with one offset moved refused",
         std::to_string(refused_all) + " of " + std::to_string(trials));
}

}  // namespace

int main() {
  g_rng.seed(19);
  test_valid();
  test_dtype_bits();
  test_length();
  test_syntax();
  test_entries();
  test_duplicates();
  test_tiling();
  test_alignment();
  test_random();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
