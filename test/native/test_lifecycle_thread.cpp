// The lifecycle threads (cuda/src/lifecycle_thread.h) that vt_engine_load and vt_engine_free hand their work to:
// calls one after another, from whatever thread, run on one thread of their own, so that every load and teardown
// allocates from the same malloc arena; calls at the same time each get a thread (a load never waits for another);
// a call from inside a call runs inline; what the work throws reaches the caller.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "check.h"
#include "lifecycle_thread.h"

namespace {

std::thread::id where_it_runs() {
  std::thread::id id;
  vt::on_lifecycle_thread([&] { id = std::this_thread::get_id(); });
  return id;
}

// Spins until flag is set or 10 s pass; false on timeout (so a wrong implementation fails instead of hanging).
bool wait_for(const std::atomic<bool> &flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

int main() {
  // One after another, from this thread and from others: one thread, not the caller's.
  const std::thread::id first = where_it_runs();
  CHECK(first != std::this_thread::get_id());
  CHECK(where_it_runs() == first);
  std::thread::id from_other;
  std::thread([&] { from_other = where_it_runs(); }).join();
  CHECK(from_other == first);

  // A call inside a call runs where it is (a teardown inside a load must not wait for its own thread).
  std::thread::id outer, inner;
  vt::on_lifecycle_thread([&] {
    outer = std::this_thread::get_id();
    inner = where_it_runs();
  });
  CHECK(outer == first);
  CHECK(inner == first);

  // At the same time: the second call does not wait for the first, which waits for it to start.
  std::atomic<bool> first_started{false}, second_started{false};
  bool first_saw_second = false;
  std::thread::id a_id, b_id;
  std::thread a([&] {
    vt::on_lifecycle_thread([&] {
      a_id = std::this_thread::get_id();
      first_started = true;
      first_saw_second = wait_for(second_started);
    });
  });
  std::thread b([&] {
    CHECK(wait_for(first_started));  // b's call comes while a's runs
    vt::on_lifecycle_thread([&] {
      b_id = std::this_thread::get_id();
      second_started = true;
    });
  });
  a.join();
  b.join();
  CHECK(first_saw_second);
  CHECK(a_id != b_id);
  CHECK(a_id != std::thread::id() && b_id != std::thread::id());
  // Afterwards, calls one at a time go back to the first thread.
  CHECK(where_it_runs() == first);

  // What the work throws reaches the caller, type and message; the thread serves the next call.
  std::string caught;
  try {
    vt::on_lifecycle_thread([] { throw std::runtime_error("load failed: no such file"); });
  } catch (const std::runtime_error &e) {
    caught = e.what();
  }
  CHECK(caught == "load failed: no such file");
  CHECK(where_it_runs() == first);

  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
