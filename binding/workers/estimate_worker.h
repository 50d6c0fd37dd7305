// Engine.estimate(): sizes an engine from config.json and the safetensors headers on a worker thread (it maps
// the files and reads their headers, which can touch the disk).
#pragma once

#include <napi.h>

#include <string>

#include "vt_engine.h"

namespace vtb {

class EstimateWorker : public Napi::AsyncWorker {
 public:
  // args: dir, params
  static Napi::Value start(const Napi::CallbackInfo &info);

  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error &e) override;

 private:
  EstimateWorker(Napi::Env env, Napi::Promise::Deferred deferred) : Napi::AsyncWorker(env, "vtengine.estimate"), deferred_(deferred) {}

  Napi::Promise::Deferred deferred_;
  std::string dir_;
  vt_engine_params params_{};
  vt_memory_estimate result_{};
  vt_status status_ = VT_OK;
  std::string message_;
};

}  // namespace vtb
