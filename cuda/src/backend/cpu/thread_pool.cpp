// ThreadPool: n - 1 persistent workers plus the calling thread as worker 0.
//
// A decode step runs hundreds of short loops (one per matmul, norm, attention...), each a few tens of
// microseconds. Waking a sleeping thread through a futex costs about as much as such a loop, so a worker that
// has just finished spins on the generation counter for a short while (VT_CPU_SPIN_US, default 200 µs) before
// it sleeps on the condition variable; between steps, or when the engine is idle, it sleeps and burns nothing.
// The dispatcher touches the mutex only when some worker is actually asleep.
//
// A skipped worker (index >= this loop's chunk count) must not read the job fields: the dispatcher does not
// wait for it and may already be writing the next job. So the chunk count travels inside the generation word
// itself (low 16 bits), and only workers that own a chunk, which the dispatcher does wait for, read the rest.
//
// The sleep handshake is Dekker-style on two seq_cst atomics: a worker publishes "I am going to sleep"
// (sleepers++) and then re-reads the generation; the dispatcher publishes the new generation and then reads
// sleepers. At least one of them sees the other's write, so a wake-up is never lost.
#include "backend/cpu/thread_pool.h"
#include "tuning.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace vt::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

int64_t spin_budget_ns() {
  const int us = cpu_spin_us_env();  // VT_CPU_SPIN_US; -1 when unset
  return int64_t(us < 0 ? 200 : us) * 1000;
}

// Spins until pred() holds or the budget runs out; the clock is read only every 64 spins. After the first
// few microseconds each round also yields the core: when the pool has more threads than free cores (a busy
// machine), the thread being waited for may be runnable but not running, and pure spinning would keep it
// off the core for a whole time slice.
template <class Pred>
bool spin_until(Pred pred, int64_t budget_ns) {
  if (pred()) return true;
  if (budget_ns <= 0) return false;
  constexpr int64_t kPureSpinNs = 5000;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    auto el = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                  .count();
    if (el > budget_ns) return pred();
    if (el > kPureSpinNs) std::this_thread::yield();
  }
}

}  // namespace

struct ThreadPool::Impl {
  using Fn = std::function<void(int64_t, int64_t, int)>;

  // Written by the dispatcher before it bumps `generation`, read only by workers that own a chunk.
  const Fn *fn = nullptr;
  int64_t n = 0;
  int n_chunks = 0;
  int64_t spin_ns = 0;

  // (counter << 16) | n_chunks of the latest job.
  alignas(64) std::atomic<uint64_t> generation{0};
  alignas(64) std::atomic<int> pending{0};    // chunks not yet finished by workers 1..n_chunks-1
  alignas(64) std::atomic<int> sleepers{0};   // workers blocked (or about to block) on wake_cv
  std::atomic<bool> caller_asleep{false};     // the dispatcher blocked on done_cv
  std::atomic<bool> stop{false};

  std::mutex mu;
  std::condition_variable wake_cv;
  std::condition_variable done_cv;
  std::exception_ptr error;  // first exception thrown by a worker's chunk, rethrown by run()
  std::vector<std::thread> threads;

  void chunk(int i, int64_t *b, int64_t *e) const {
    *b = n * i / n_chunks;
    *e = n * (i + 1) / n_chunks;
  }

  void worker(int index) {
    uint64_t seen = 0;
    for (;;) {
      auto changed = [&] { return generation.load(std::memory_order_acquire) != seen; };
      if (!spin_until(changed, spin_ns)) {
        std::unique_lock<std::mutex> lk(mu);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        while (generation.load(std::memory_order_seq_cst) == seen) wake_cv.wait(lk);
        sleepers.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = generation.load(std::memory_order_acquire);
      if (stop.load(std::memory_order_acquire)) return;
      if (index >= int(seen & 0xffff)) continue;  // this loop needs fewer threads than the pool has

      int64_t b, e;
      chunk(index, &b, &e);
      try {
        (*fn)(b, e, index);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!error) error = std::current_exception();
      }
      // seq_cst on both sides, as with sleepers: the caller stores caller_asleep, then re-reads pending.
      const bool last = pending.fetch_sub(1, std::memory_order_seq_cst) == 1;
      if (last && caller_asleep.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lk(mu);  // orders the notify after the caller's predicate check
        done_cv.notify_one();
      }
    }
  }

  void publish(int chunks) {
    uint64_t next = ((generation.load(std::memory_order_relaxed) >> 16) + 1) << 16 | uint64_t(chunks);
    generation.store(next, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lk(mu);
      wake_cv.notify_all();
    }
  }

  void wait_done() {
    auto done = [&] { return pending.load(std::memory_order_acquire) == 0; };
    if (spin_until(done, spin_ns > 0 ? spin_ns : 0)) return;
    std::unique_lock<std::mutex> lk(mu);
    caller_asleep.store(true, std::memory_order_seq_cst);
    while (pending.load(std::memory_order_seq_cst) != 0) done_cv.wait(lk);
    caller_asleep.store(false, std::memory_order_relaxed);
  }
};

// Fewer than one thread means one: the engine decides the count (the chunk count field limits it to 65535).
ThreadPool::ThreadPool(int n_threads)
    : impl_(new Impl), n_threads_(n_threads < 1 ? 1 : n_threads > 65535 ? 65535 : n_threads) {
  impl_->spin_ns = spin_budget_ns();
  impl_->threads.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) impl_->threads.emplace_back([this, i] { impl_->worker(i); });
}

ThreadPool::~ThreadPool() {
  impl_->stop.store(true, std::memory_order_release);
  impl_->publish(0);
  for (auto &t : impl_->threads) t.join();
  delete impl_;
}

void ThreadPool::run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)> &fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t want = n / grain;
  int n_chunks = int(want < n_threads_ ? (want < 1 ? 1 : want) : n_threads_);
  if (n_chunks == 1) {
    fn(0, n, 0);
    return;
  }
  Impl &p = *impl_;
  p.fn = &fn;
  p.n = n;
  p.n_chunks = n_chunks;
  p.pending.store(n_chunks - 1, std::memory_order_relaxed);
  p.publish(n_chunks);  // release: the fields above are visible to every worker that sees the new generation

  int64_t b, e;
  p.chunk(0, &b, &e);
  std::exception_ptr mine;
  try {
    fn(b, e, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  p.wait_done();
  if (mine) std::rethrow_exception(mine);
  if (p.error) {
    std::exception_ptr err;
    std::swap(err, p.error);
    std::rethrow_exception(err);
  }
}

}  // namespace vt::cpu
