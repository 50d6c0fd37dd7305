#include "loader/json_fields.h"

#include "status.h"

namespace vt {

using nlohmann::json;

std::string describe_json(const json &v) {
  if (v.is_string()) {
    const auto &s = v.get_ref<const std::string &>();
    return "\"" + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "\"";
  }
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  return std::string("an ") + v.type_name();
}

const json *json_field(const json &obj, const char *key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] static void wrong_type(const json &v, const char *key, const std::string &where, const char *want) {
  fail(VT_ERR_BAD_CHECKPOINT, where + ": `" + key + "` must be " + want + ", not " + describe_json(v));
}

std::optional<double> json_number(const json &obj, const char *key, const std::string &where) {
  const json *v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(*v, key, where, "a number");
  return v->get<double>();
}

std::optional<int64_t> json_integer(const json &obj, const char *key, const std::string &where) {
  const json *v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)) wrong_type(*v, key, where, "a 64-bit integer");
  if (!v->is_number_integer()) wrong_type(*v, key, where, "an integer");
  return v->get<int64_t>();
}

std::optional<bool> json_bool(const json &obj, const char *key, const std::string &where) {
  const json *v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(*v, key, where, "true or false");
  return v->get<bool>();
}

std::optional<std::string> json_string(const json &obj, const char *key, const std::string &where) {
  const json *v = json_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(*v, key, where, "a string");
  return v->get<std::string>();
}

}  // namespace vt
