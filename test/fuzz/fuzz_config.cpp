// Fuzz target: config.json (and generation_config.json) through parse_model_config, then the RoPE table the model
// would build from the result. The input is config.json's text, optionally followed by an ASCII record separator
// (0x1e) and generation_config.json's. Any outcome but success or a vt::Error of a config status is a crash, and
// an accepted config must be one the engine can compute: whole positive sizes, a supported RoPE, a finite RoPE
// table (computed here as the model would, for head_dim up to 8192).
// Built by scripts/fuzz-parsers.sh, with libFuzzer (clang) or test/fuzz/driver.cpp (g++).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "loader/config.h"
#include "status.h"
#include "tally.h"

static FuzzTally g_tally;

static void check_accepted(const vt::ModelConfig &c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.n_layers <= 0 || c.n_heads <= 0 ||
      c.n_kv_heads <= 0 || c.head_dim <= 0 || c.max_position_embeddings <= 0)
    __builtin_trap();
  if (c.head_dim % 2 != 0 || c.n_heads % c.n_kv_heads != 0) __builtin_trap();
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) __builtin_trap();
  const auto &t = c.rope.type;
  if (t != "default" && t != "linear" && t != "llama3" && t != "yarn") __builtin_trap();
  if (c.head_dim > 8192) return;  // the table is head_dim / 2 floats: keep the fuzzer fast
  std::vector<float> inv;
  float scale = 0;
  // rope_tables' own backstop throws for a table that is not finite; config_arithmetic's ranges must have refused
  // such a config already, so that is a crash here too.
  try {
    vt::rope_tables(c, &inv, &scale);
  } catch (const vt::Error &) {
    __builtin_trap();
  }
  // RoPE turns rotary_dims of each head (Qwen3.5: a part; the rest: all), a whole, even number the config allows.
  if (c.rotary_dims < 2 || c.rotary_dims % 2 != 0 || c.rotary_dims > c.head_dim) __builtin_trap();
  if (inv.size() != size_t(c.rotary_dims / 2) || !std::isfinite(scale)) __builtin_trap();
  for (float f : inv)
    if (!std::isfinite(f)) __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view all(reinterpret_cast<const char *>(data), size);
  const size_t sep = all.find('\x1e');
  const std::string_view config = all.substr(0, sep);
  std::optional<std::string_view> generation;
  if (sep != std::string_view::npos) generation = all.substr(sep + 1);
  try {
    check_accepted(vt::parse_model_config(config, generation));
    g_tally.add("accepted");
  } catch (const vt::Error &e) {
    const vt_status s = e.status();
    g_tally.add(status_name(s));
    if (s != VT_ERR_BAD_CHECKPOINT && s != VT_ERR_UNSUPPORTED_ARCH && s != VT_ERR_UNSUPPORTED_DTYPE) __builtin_trap();
    if (std::strstr(e.what(), "config") == nullptr && std::strstr(e.what(), "architecture") == nullptr) __builtin_trap();
  }
  return 0;
}
