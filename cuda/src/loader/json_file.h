// Reading the checkpoint's small JSON files (config.json, generation_config.json, model.safetensors.index.json):
// every way a file can be wrong — a directory, a FIFO, unreadable, huge, not JSON, not an object — is a typed
// error naming the file, never a stream exception that would reach the caller as ERR_INTERNAL.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace vt {

// Larger than any real config or shard index (a trillion-parameter index is ~10 MB); past it the file is corrupt.
constexpr size_t kMaxCheckpointJsonBytes = 100'000'000;

// The file's bytes, or nullopt when there is no such file (the caller decides whether that is fatal). Present but
// not a regular file, unreadable, or over kMaxCheckpointJsonBytes: ERR_BAD_CHECKPOINT naming the path.
std::optional<std::string> read_checkpoint_file(const std::filesystem::path &path);

// `text` parsed as a JSON object; `name` (e.g. "config.json") leads every message. ERR_BAD_CHECKPOINT otherwise.
nlohmann::json parse_json_object(std::string_view text, const std::string &name);

}  // namespace vt
