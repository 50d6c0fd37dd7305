// The engine's whole life through the C API, several times over, on the packaged default model (models/default,
// on the CPU): load, concurrent requests with aborts and a pause (vt_engine_allow_tokens), free with requests still
// in flight (a paused one among them), load again. It checks
// that every request ends exactly once, and that the heap holds no more after the later cycles than after the
// second one: a leak, or a cache that grows with each engine, fails it. scripts/sanitize.sh runs it under ASan,
// where LeakSanitizer also checks the process at exit and the live bytes come from ASan's own allocator.
#include <malloc.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "vt_engine.h"

#if defined(__SANITIZE_ADDRESS__)
// From <sanitizer/allocator_interface.h>, declared here: g++'s packages do not always ship the header.
extern "C" size_t __sanitizer_get_current_allocated_bytes(void);
#endif

namespace {

constexpr const char *kModel = "models/default";
constexpr int kCycles = 6;
constexpr int kRequests = 8;

// Bytes the program has allocated and not freed. Under ASan, its allocator's exact count; otherwise glibc's
// (mallinfo2: in use in every arena, plus mmapped chunks), which also counts the chunks the calling thread keeps
// in its tcache, hence the tolerance below.
size_t live_bytes() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

struct Requests {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, int> finishes;  // id -> finishing events seen
  std::map<uint64_t, int> tokens;    // id -> tokens seen
  std::map<uint64_t, int> max_tokens;
  int open = 0;
  bool bad = false;  // an event for an unknown id, or a completion count that disagrees with the tokens

  static void on_step(const vt_step_event *events, int32_t n, void *user) {
    auto *self = static_cast<Requests *>(user);
    std::lock_guard<std::mutex> lock(self->mu);
    for (int32_t i = 0; i < n; ++i) {
      const vt_step_event &e = events[i];
      if (!self->max_tokens.count(e.request_id)) {
        self->bad = true;
        continue;
      }
      if (e.token >= 0) ++self->tokens[e.request_id];
      if (e.finish == VT_FINISH_NONE) continue;
      if (++self->finishes[e.request_id] == 1) --self->open;
      if (e.completion_tokens != self->tokens[e.request_id]) self->bad = true;
    }
    self->cv.notify_all();
  }
};

// One engine's life. `free_in_flight`: free it while its requests still run, as an app that exits mid-generation
// does; otherwise wait until every request has ended first.
void cycle(int index, bool free_in_flight) {
  vt_engine_params p = vt_engine_default_params();
  p.device = VT_DEVICE_CPU;
  p.n_threads = 2;
  p.max_context = 512;
  vt_engine *e = nullptr;
  char err[512] = {0};
  const vt_status st = vt_engine_load(kModel, p, &e, err, sizeof err);
  CHECK(st == VT_OK);
  if (st != VT_OK) {
    std::printf("load %s: %s\n", kModel, err);
    return;
  }
  Requests r;
  CHECK(vt_engine_set_step_callback(e, &Requests::on_step, &r) == VT_OK);

  std::vector<uint64_t> ids;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int32_t> prompt(1 + below(96));
    for (auto &t : prompt) t = int32_t(1 + below(4095));
    vt_request_params rp = vt_request_default_params();
    rp.max_tokens = int32_t(1 + below(24));
    rp.has_seed = 1;
    rp.seed = uint64_t(index * 100 + i);
    if (i % 2) rp.temperature = 0.8f, rp.top_k = 40, rp.top_p = 0.95f;
    if (i % 3 == 0) rp.logprobs = 3;
    // Backpressure from its first step: request 5 may generate one token, then pauses (a limit given by a later
    // vt_engine_allow_tokens alone could come after the step thread has run past it).
    if (i == 5) rp.allowed_tokens = 1, rp.max_tokens = 24, rp.n_stop_ids = 0;  // no EOS: only the pause stops it
    uint64_t id = 0;
    {
      // Registered before submit: the step thread may report the request before submit returns.
      std::lock_guard<std::mutex> lock(r.mu);
      const vt_status s = vt_engine_submit(e, prompt.data(), int32_t(prompt.size()), rp, &id, err, sizeof err);
      CHECK(s == VT_OK);
      if (s != VT_OK) continue;
      r.max_tokens[id] = rp.max_tokens;
      ++r.open;
    }
    ids.push_back(id);
  }
  {
    vt_request_params bad = vt_request_default_params();
    bad.allowed_tokens = -2;
    const int32_t one = 1;
    uint64_t id = 0;
    CHECK(vt_engine_submit(e, &one, 1, bad, &id, err, sizeof err) == VT_ERR_INVALID_OPTION);
  }
  vt_engine_abort(e, ids[1]);  // at once, probably before its first step
  vt_engine_abort(e, 1u << 30);  // an id that never was: ignored
  // Backpressure: bad calls are refused; a finished id is not an error.
  CHECK(vt_engine_allow_tokens(e, ids[5], -2, err, sizeof err) == VT_ERR_INVALID_OPTION);
  CHECK(vt_engine_allow_tokens(e, 1u << 30, 1, err, sizeof err) == VT_ERR_INVALID_OPTION);
  CHECK(vt_engine_allow_tokens(e, 0, 1, err, sizeof err) == VT_ERR_INVALID_OPTION);
  CHECK(vt_engine_allow_tokens(nullptr, ids[5], 1, err, sizeof err) == VT_ERR_INVALID_OPTION);
  CHECK(vt_engine_allow_tokens(e, ids[1], 3, err, sizeof err) == VT_OK);  // aborted above
  if (!free_in_flight) {
    {
      std::unique_lock<std::mutex> lock(r.mu);
      // After the first token of request 2, abort request 4: an abort in the middle of decoding.
      r.cv.wait(lock, [&] { return r.tokens[ids[2]] > 0 || r.finishes[ids[2]] > 0; });
    }
    vt_engine_abort(e, ids[4]);
    // Request 5 stops at its one token (no EOS can end it) and waits, holding its KV, until allowed more.
    auto ended5 = [&] {
      std::lock_guard<std::mutex> lock(r.mu);
      return r.finishes[ids[5]] > 0;
    };
    vt_engine_stats st{};
    while (vt_engine_stats_get(e, &st) == VT_OK && st.requests_paused == 0 && !ended5())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(!ended5());
    {
      std::lock_guard<std::mutex> lock(r.mu);
      CHECK(r.tokens[ids[5]] == 1);
    }
    CHECK(st.requests_paused == 1 && st.kv_blocks_used > 0);
    CHECK(vt_engine_allow_tokens(e, ids[5], 1, err, sizeof err) == VT_OK);  // what it has: it stays paused
    CHECK(vt_engine_allow_tokens(e, ids[5], -1, err, sizeof err) == VT_OK);
    std::unique_lock<std::mutex> lock(r.mu);
    r.cv.wait(lock, [&] { return r.open == 0; });
  }
  vt_engine_free(e);  // ends what is left with an abort, through the callback, before it returns

  std::lock_guard<std::mutex> lock(r.mu);
  CHECK(!r.bad);
  CHECK(r.open == 0);
  for (uint64_t id : ids) {
    CHECK(r.finishes[id] == 1);
    CHECK(r.tokens[id] <= r.max_tokens[id]);
  }
}

}  // namespace

int main() {
  g_rng.seed(19);
  std::vector<size_t> live;
  live.reserve(kCycles);  // allocated once, before the first count: its growth would show as the engine's
  for (int c = 0; c < kCycles; ++c) {
    cycle(c, c % 2 == 1);
    live.push_back(live_bytes());
    std::printf("cycle %d: %zu bytes live after free\n", c, live.back());
  }
  // From the second cycle on, every lazy one-time setup has happened: the later cycles must end where it did.
#if defined(__SANITIZE_ADDRESS__)
  constexpr size_t kSlack = 0;
#else
  constexpr size_t kSlack = 64 * 1024;  // the main thread's tcache (at most 7 chunks per size class)
#endif
  for (int c = 2; c < kCycles; ++c) {
    record(live[c] <= live[1] + kSlack, "cycle " + std::to_string(c) + " ends with no more live heap than cycle 1",
           std::to_string(live[c]) + " > " + std::to_string(live[1]) + " + " + std::to_string(kSlack));
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
