// What the standalone native tests share: pass/fail counting with a message per failure, and one seeded RNG.
// Each test ends by printing "N passed, N failed" (the line CI reads) and exits non-zero on any failure.
#pragma once

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

inline int g_passed = 0, g_failed = 0;
inline std::mt19937_64 g_rng;

inline void record(bool ok, const std::string &what, const std::string &why = "") {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::printf("FAIL %s%s%s\n", what.c_str(), why.empty() ? "" : ": ", why.c_str());
  }
}

// CHECK(cond): records the condition, naming file, line and the condition's text when it fails.
#define CHECK(cond) record(static_cast<bool>(cond), std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #cond)

inline double uni(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g_rng); }
inline int64_t below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(g_rng); }
