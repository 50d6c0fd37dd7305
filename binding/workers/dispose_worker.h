// Frees an engine off the JS thread (joining the step thread can take a step), then releases its stream.
#pragma once

#include <napi.h>

#include "token_stream.h"
#include "vt_engine.h"

namespace vtb {

class DisposeWorker : public Napi::AsyncWorker {
 public:
  DisposeWorker(Napi::Env env, vt_engine *engine, TokenStream *stream, Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "vtengine.dispose"), engine_(engine), stream_(stream), deferred_(deferred) {}

  void Execute() override { vt_engine_free(engine_); }
  // Resolved once the events the engine queued before it stopped (its last tokens, the aborts of what was left)
  // have reached JS: dispose() then settles every generation with exactly what the engine reported.
  void OnOK() override { stream_->release(Env(), deferred_); }

 private:
  vt_engine *engine_;
  TokenStream *stream_;
  Napi::Promise::Deferred deferred_;
};

}  // namespace vtb
