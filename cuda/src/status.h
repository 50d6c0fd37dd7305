// Failures inside the engine are C++ exceptions carrying a vt_status; the C ABI boundary (c_api.cpp) turns
// them into a status code plus message, so nothing escapes into the caller and nothing aborts the process.
#pragma once

#include <stdexcept>
#include <string>

#include "vt_engine.h"

namespace vt {

class Error : public std::runtime_error {
 public:
  Error(vt_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
  vt_status status() const { return status_; }

 private:
  vt_status status_;
};

[[noreturn]] inline void fail(vt_status status, const std::string &message) { throw Error(status, message); }

}  // namespace vt
