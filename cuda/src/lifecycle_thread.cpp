#include "lifecycle_thread.h"

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace vt::detail {

namespace {

struct Call {
  void (*fn)(void *) = nullptr;
  void *arg = nullptr;
  std::exception_ptr error;
  bool done = false;
  std::condition_variable finished;
};

struct Worker {
  Call *call = nullptr;  // the job in hand; null: idle
  std::condition_variable has_call;
};

thread_local bool t_lifecycle = false;

// Never destroyed: its threads are detached and may be parked in wait() when the process exits, and a destructor
// at exit would have to join them or leave std::thread objects joinable.
struct Pool {
  std::mutex mu;
  std::vector<std::unique_ptr<Worker>> workers;  // in creation order: the first idle one takes the next call

  static Pool &get() {
    static Pool *p = new Pool;
    return *p;
  }

  void serve(Worker *w) {
    t_lifecycle = true;
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      w->has_call.wait(lk, [&] { return w->call != nullptr; });
      Call *c = w->call;
      lk.unlock();
      try {
        c->fn(c->arg);
      } catch (...) {
        c->error = std::current_exception();
      }
      lk.lock();
      w->call = nullptr;
      c->done = true;
      c->finished.notify_one();  // under the lock: once the caller sees done it may leave, and c with it
    }
  }

  // Under mu: the first idle worker, else a new one on a thread of its own; null when neither memory nor a thread
  // can be had (the caller then does the work itself). The worker is in the list before its thread starts, so a
  // failure after the start can never free a worker its thread waits on.
  Worker *idle_or_new() {
    for (auto &w : workers)
      if (!w->call) return w.get();
    try {
      workers.push_back(std::make_unique<Worker>());
    } catch (const std::bad_alloc &) {
      return nullptr;
    }
    Worker *w = workers.back().get();
    try {
      std::thread([this, w] { serve(w); }).detach();
    } catch (const std::system_error &) {
      workers.pop_back();
      return nullptr;
    }
    return w;
  }
};

}  // namespace

void run_on_lifecycle_thread(void (*fn)(void *), void *arg) {
  if (t_lifecycle) return fn(arg);
  Pool &pool = Pool::get();
  Call call;
  call.fn = fn;
  call.arg = arg;
  std::unique_lock<std::mutex> lk(pool.mu);
  Worker *w = pool.idle_or_new();
  if (!w) {  // no thread to be had: do the work here, as before
    lk.unlock();
    return fn(arg);
  }
  w->call = &call;
  w->has_call.notify_one();
  call.finished.wait(lk, [&] { return call.done; });
  lk.unlock();
  if (call.error) std::rethrow_exception(call.error);
}

}  // namespace vt::detail
