// The safetensors format's rules for one file's header, applied as the safetensors library applies them, so a file
// it refuses is refused here too (a pure function over the header's bytes: unit tested and fuzzed on its own).
//
// The rules (safetensors/src/tensor.rs, read_metadata + Metadata::validate):
//   - the header length is at most 100,000,000 bytes and fits in the file after the 8-byte length;
//   - the header is UTF-8, starts with '{' and is one JSON object (trailing spaces allowed: writers pad with them);
//   - `__metadata__`, if present, is null or an object of strings;
//   - every other key is a tensor: {"dtype": known name, "shape": [non-negative integers],
//     "data_offsets": [begin, end]} with begin <= end and end - begin == product(shape) x element size;
//   - sorted by offset, the tensors tile the data section exactly: the first begins at 0, each begins where the one
//     before ends (no gap, no overlap), and the last ends at the end of the file.
// Stricter than the library, on purpose:
//   - a key repeated in any object (two tensors of one name, two `dtype` fields) is an error: JSON parsers keep one
//     of the two silently, and which one differs between them;
//   - every tensor wider than a byte starts at a file offset that is a multiple of its element size. The format
//     allows a misaligned tensor, but the engine reads weights in place from the mapping (which is page-aligned),
//     and a float read through a misaligned pointer is undefined behaviour. Every writer we know aligns (the
//     safetensors library pads the header to 8 bytes and orders tensors by falling alignment), so such a file is
//     refused with a message saying how to fix it rather than copied: a copy would be memory no plan accounts for.
// Codes: ERR_TRUNCATED_CHECKPOINT when a tensor's bytes run past the end of the file, ERR_UNSUPPORTED_DTYPE for a
// dtype name the format does not define, ERR_BAD_CHECKPOINT for everything else; each message names the file
// and the tensor or field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vt {

// The safetensors library's MAX_HEADER_SIZE: a longer header is corrupt (or hostile).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct HeaderTensor {
  std::string name;
  std::string dtype;            // as the header spells it: "BF16", "F32", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section (which starts at 8 + header length)
};

struct SafetensorsHeader {
  std::vector<HeaderTensor> tensors;                             // in data order (by begin, then end)
  std::vector<std::pair<std::string, std::string>> metadata;     // `__metadata__`, in file order
};

// Bits per element of a dtype the safetensors format defines ("F4" is 4, "BF16" 16), 0 for an unknown name.
int safetensors_dtype_bits(std::string_view dtype);

// The 8-byte length prefix against the file: `file_size` is the whole file's size. `where` names the file in
// messages.
void check_safetensors_header_length(uint64_t header_len, uint64_t file_size, const std::string &where);

// Parses and validates `header` (the header_len bytes after the prefix); `data_size` is the number of file bytes
// after the header. Throws vt::Error; on success every tensor's range lies inside the data section.
SafetensorsHeader parse_safetensors_header(std::string_view header, uint64_t data_size, const std::string &where);

}  // namespace vt
