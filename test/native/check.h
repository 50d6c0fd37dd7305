// What the standalone native tests share: pass/fail counting with a message per failure, one seeded RNG, and the
// comparison of an op's fp32 output against a float64 reference.
// Each test ends by printing "N passed, N failed" (the line CI reads) and exits non-zero on any failure.
#pragma once

#include <cmath>
#include <cstddef>
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

// |got - ref| <= tol · scale (+ a denormal floor) everywhere, and nothing NaN (an element left unwritten, or one
// computed from state it must not read, such as a fresh slot's old state). scale is the magnitude of what each
// element was summed from, the size fp32 rounding follows. On failure, why names the worst element.
inline bool close(const float *got, const double *ref, const double *scale, size_t n, double tol, std::string *why) {
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(got[i])) {
      *why = "element " + std::to_string(i) + " is NaN (not written, or computed from state it must not read)";
      return false;
    }
    double r = std::fabs(got[i] - ref[i]) / (tol * scale[i] + 1e-30);
    if (r > worst_ratio) worst_ratio = r, worst = i;
  }
  if (worst_ratio <= 1) return true;
  char buf[200];
  std::snprintf(buf, sizeof buf, "element %zu: got %.9g want %.9g (err %.3g of scale %.3g, tol %.1g)", worst,
                double(got[worst]), ref[worst], std::fabs(got[worst] - ref[worst]) / scale[worst], scale[worst], tol);
  *why = buf;
  return false;
}
