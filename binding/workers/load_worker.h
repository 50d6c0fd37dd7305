// Loads a checkpoint on a worker thread. The baton rule (sharp): everything the worker needs is copied out of
// JS values on the JS thread into plain fields; the worker touches only those; the JS result is built in OnOK.
#pragma once

#include <napi.h>

#include <string>

#include "token_stream.h"
#include "vt_engine.h"

namespace vtb {

class LoadWorker : public Napi::AsyncWorker {
 public:
  // args: dir, params, onProgress, onStep, cancel (Int32Array over a SharedArrayBuffer)
  static Napi::Value start(const Napi::CallbackInfo &info);

  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error &e) override;

 private:
  LoadWorker(Napi::Env env, Napi::Promise::Deferred deferred);
  static void on_progress(float fraction, const char *stage, void *user);
  void finish_progress();

  Napi::Promise::Deferred deferred_;
  std::string dir_;
  vt_engine_params params_{};
  Napi::ThreadSafeFunction progress_;
  Napi::FunctionReference on_step_;
  Napi::Reference<Napi::Int32Array> cancel_ref_;  // keeps the cancel flag's memory alive while loading
  vt_engine *engine_ = nullptr;
  vt_status status_ = VT_OK;
  std::string message_;
};

}  // namespace vtb
