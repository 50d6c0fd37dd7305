// Loads a checkpoint off the JS thread, and settles the JS promise on the JS thread through the same thread-safe
// function that carries its progress (so the result arrives after every progress call). The job's thread waits in
// vt_engine_load, which does the work on the engine's lifecycle thread (cuda/src/lifecycle_thread.h).
//
// Not a Napi::AsyncWorker, on purpose: Node waits for the libuv pool's work to finish before it runs an
// environment's cleanup hooks, so a worker thread terminated during a 60-second load would take 60 seconds to end.
// An own thread can be told to stop: the environment's end (cleanup hook, or lib/'s process.on('exit') through
// LiveSet) sets the cancel flag, joins the thread (the load checks the flag at every tensor) and frees whatever
// it had loaded.
//
// The baton rule holds: everything the thread needs is copied out of JS values on the JS thread first.
#pragma once

#include <napi.h>

#include <string>
#include <thread>

#include "token_stream.h"
#include "vt_engine.h"

namespace vtb {

class LoadJob {
 public:
  // JS: loadEngine(dir, params, onProgress, onStep, cancel: Int32Array over a SharedArrayBuffer) -> Promise
  static Napi::Value start(const Napi::CallbackInfo &info);

  // The environment is ending: stop the load, wait for its thread, free what it loaded. The promise never
  // settles (nobody is left to see it). Idempotent; JS thread only.
  void abandon();

 private:
  explicit LoadJob(Napi::Env env);
  void run();                                                   // the load thread
  static void on_progress(float fraction, const char *stage, void *user);  // the load thread
  void settle(Napi::Env env);                                   // JS thread, after the thread's last call
  void leave();                                                 // drops the hook and leaves the live set
  static void on_env_cleanup(void *self);

  napi_env env_;
  Napi::Promise::Deferred deferred_;
  std::string dir_;
  vt_engine_params params_{};
  Napi::ThreadSafeFunction calls_;  // progress, then the result; its finalizer deletes this job
  Napi::FunctionReference on_step_;
  Napi::Reference<Napi::Int32Array> cancel_ref_;  // keeps the cancel flag's memory alive while loading
  int32_t *cancel_flag_ = nullptr;                 // cancel_ref_'s element, which JS may set too
  std::thread thread_;
  bool hooked_ = false, done_ = false;
  // Written by the load thread, read on the JS thread after join().
  vt_engine *engine_ = nullptr;
  vt_status status_ = VT_OK;
  std::string message_;
};

}  // namespace vtb
