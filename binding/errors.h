// Native failures reach JS as plain Errors whose `code` is the stable status name; lib/errors.ts maps the code
// to an EngineError subclass.
#pragma once

#include <napi.h>

#include <string>

#include "vt_engine.h"

namespace vtb {

inline Napi::Error status_error(Napi::Env env, vt_status status, const std::string &message) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, vt_status_name(status)));
  return e;
}

inline Napi::Error code_error(Napi::Env env, const char *code, const std::string &message) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  return e;
}

}  // namespace vtb
