// What every benchmark driver's JSON starts with (bench/cuda-engine.cpp, bench/memory-engine.cpp): the run's
// identity from the environment the GPU scripts export (commit, GPU, shape) and the time, for the RESULTS rows.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <ctime>
#include <string>

// {"VT_BENCH_COMMIT": ..., "VT_BENCH_GPU": ..., "VT_BENCH_SHAPE": ...}, the ones that are set.
inline nlohmann::json bench_meta() {
  nlohmann::json meta = nlohmann::json::object();
  for (const char *k : {"VT_BENCH_COMMIT", "VT_BENCH_GPU", "VT_BENCH_SHAPE"})
    if (const char *v = std::getenv(k)) meta[k] = v;
  return meta;
}

// Now, UTC, ISO 8601 to the second.
inline std::string bench_date() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}
