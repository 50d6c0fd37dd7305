// How the fuzz targets' inputs ended, printed to stderr when the process exits (scripts/fuzz-parsers.sh shows the
// line): a target whose mutants are all refused by the first rule is fuzzing nothing deeper, and this shows it.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "vt_engine.h"

struct FuzzTally {
  std::map<std::string, unsigned long long> counts;
  void add(const std::string &outcome) { ++counts[outcome]; }
  ~FuzzTally() {
    std::string line = "outcomes:";
    for (const auto &[what, n] : counts) line += " " + what + " " + std::to_string(n) + ",";
    line.pop_back();
    std::fprintf(stderr, "%s\n", line.c_str());
  }
};

inline const char *status_name(vt_status s) {
  switch (s) {
    case VT_ERR_BAD_CHECKPOINT: return "ERR_BAD_CHECKPOINT";
    case VT_ERR_TRUNCATED_CHECKPOINT: return "ERR_TRUNCATED_CHECKPOINT";
    case VT_ERR_UNSUPPORTED_DTYPE: return "ERR_UNSUPPORTED_DTYPE";
    case VT_ERR_UNSUPPORTED_ARCH: return "ERR_UNSUPPORTED_ARCH";
    default: return "other";
  }
}
