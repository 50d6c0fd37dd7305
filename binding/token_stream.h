// The engine-level stream: ONE thread-safe function per engine carries every step's events, for all requests,
// from the step thread to JS. It is unref'd while no request is in flight, so a forgotten engine never keeps
// the process alive, and ref'd while one is, unless every request in flight is paused for a reader that stopped
// reading (backpressure): those can only go on when JS reads, so they do not hold the process either.
#pragma once

#include <napi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vt_engine.h"

namespace vtb {

class TokenStream {
 public:
  static TokenStream *create(Napi::Env env, Napi::Function on_step);

  // The vt_step_fn given to the engine; `user` is the TokenStream.
  static void on_step(const vt_step_event *events, int32_t n, void *user);

  // JS thread only: count requests so the stream holds the event loop exactly while work is pending.
  void request_started(Napi::Env env);
  void requests_finished(Napi::Env env, int n);
  // JS thread only: how many of the requests in flight are paused for their readers (and so wait on JS alone).
  void set_paused(Napi::Env env, int64_t n);

  // Called once, after the engine (and so the step thread) is gone. The stream deletes itself once the
  // events still queued have been delivered.
  void release();
  // release() for dispose(): resolves `drained` once every event still queued has been delivered, so that the
  // generations have every token the engine made before the promise settles; holds the event loop until then.
  void release(Napi::Env env, Napi::Promise::Deferred drained);

 private:
  struct Batch {
    std::vector<vt_step_event> events;
    std::vector<std::string> messages;  // owned copies of error messages, by event index
    std::vector<std::vector<float>> prompt_logprobs;  // owned copies, by event index
  };
  TokenStream() = default;
  static void deliver(Napi::Env env, Napi::Function fn, TokenStream *self, Batch *batch);
  void hold_loop(Napi::Env env);  // refs the function exactly while a request in flight can progress on its own

  Napi::ThreadSafeFunction tsfn_;
  int64_t in_flight_ = 0;
  int64_t paused_ = 0;
  bool holding_ = false;  // the function is ref'd
  bool released_ = false;
  std::optional<Napi::Promise::Deferred> drained_;  // resolved by the function's finalizer, after the last delivery
};

}  // namespace vtb
