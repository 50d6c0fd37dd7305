// What the engine's step callback reports, per request and per step, stamped on arrival: shared by the
// benchmark drivers that submit through the C ABI (bench/cuda-engine.cpp, bench/memory-engine.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vt_engine.h"

// Seconds since the first call (steady clock).
inline double bench_now_s() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct RequestTrace {
  struct Req {
    double submit = -1, first = -1, last = -1, final = -1;  // submit is the driver's to fill
    int tokens = 0, finish = 0;
    std::string message;
    bool done = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<uint64_t, Req> reqs;
  std::vector<std::pair<double, int>> steps;  // (arrival, token events in it)

  // vt_engine_set_step_callback(e, &RequestTrace::on_step, &trace)
  static void on_step(const vt_step_event *ev, int32_t n, void *user) {
    auto *t = static_cast<RequestTrace *>(user);
    const double now = bench_now_s();
    std::lock_guard<std::mutex> lock(t->mu);
    int tokens = 0;
    for (int32_t i = 0; i < n; ++i) {
      Req &r = t->reqs[ev[i].request_id];
      if (ev[i].token >= 0) {
        if (r.first < 0) r.first = now;
        r.last = now;
        ++r.tokens;
        ++tokens;
      }
      if (ev[i].finish != VT_FINISH_NONE) {
        r.finish = ev[i].finish;
        if (ev[i].message) r.message = ev[i].message;
        r.final = now;
        r.done = true;
      }
    }
    t->steps.emplace_back(now, tokens);
    t->cv.notify_all();
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mu);
    reqs.clear();
    steps.clear();
  }

  // false when the requests did not all finish within `seconds`.
  bool wait_all(const std::vector<uint64_t> &ids, double seconds) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
      for (uint64_t id : ids)
        if (!reqs[id].done) return false;
      return true;
    });
  }
};
