// A fixed pool of worker threads for data-parallel loops inside one step. The engine's step thread is
// worker 0 (it runs a share of every loop itself), so a pool of n threads starts n - 1 others.
#pragma once

#include <cstdint>
#include <functional>

namespace vt::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) split into contiguous chunks of at least `grain` items,
  // one chunk per thread at most; returns when all chunks are done. Not re-entrant: fn must not call run().
  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)> &fn);

 private:
  struct Impl;
  Impl *impl_;
  int n_threads_;
};

}  // namespace vt::cpu
