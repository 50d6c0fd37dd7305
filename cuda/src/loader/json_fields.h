// Typed reads of a JSON object's fields, taking each value only as the type Python's json module would give
// transformers: absent or null is nullopt; any other type is ERR_BAD_CHECKPOINT naming the field and the value —
// never a conversion (nlohmann's get<int64_t>() would turn 64.5 into 64 and true into 1 without a word).
// `where` leads the message: "config.json", "config.json: rope_scaling", ...
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace vt {

// A short, safe rendering of a value for a message: a scalar's value, else its type. Never dump() a whole array or
// object: fuzzed input can nest them deeply enough to make the recursive serializer overflow the stack.
std::string describe_json(const nlohmann::json &v);

// The field's value, or nullptr when it is absent or null.
const nlohmann::json *json_field(const nlohmann::json &obj, const char *key);

std::optional<double> json_number(const nlohmann::json &obj, const char *key, const std::string &where);
std::optional<int64_t> json_integer(const nlohmann::json &obj, const char *key, const std::string &where);
std::optional<bool> json_bool(const nlohmann::json &obj, const char *key, const std::string &where);
std::optional<std::string> json_string(const nlohmann::json &obj, const char *key, const std::string &where);

}  // namespace vt
