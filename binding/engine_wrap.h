// The JS object for a loaded engine (one ObjectWrap per native object). Its methods are thin: argument
// checking and conversion on the JS thread, then a C ABI call. Blocking work (dispose) runs on a worker; the
// ends nobody asked for (garbage collection, the environment's end: live_set.h) stop it on the JS thread.
#pragma once

#include <napi.h>

#include "token_stream.h"
#include "vt_engine.h"

namespace vtb {

class EngineWrap : public Napi::ObjectWrap<EngineWrap> {
 public:
  static void init(Napi::Env env, Napi::Object exports);
  // Wraps a loaded engine; takes ownership of both once it returns. When it throws (the environment is ending and
  // can make no object), it owns neither: the caller frees them.
  static Napi::Object create(Napi::Env env, vt_engine *engine, TokenStream *stream);

  explicit EngineWrap(const Napi::CallbackInfo &info);
  ~EngineWrap() override;

  // Stops the engine now, on this thread (joins the step thread; its live requests end), releases its stream and
  // leaves the environment's live set. Idempotent. dispose() is the asynchronous form.
  void close();

 private:
  Napi::Value model_info(const Napi::CallbackInfo &info);
  Napi::Value submit(const Napi::CallbackInfo &info);
  Napi::Value abort(const Napi::CallbackInfo &info);
  Napi::Value allow_tokens(const Napi::CallbackInfo &info);
  Napi::Value set_paused_requests(const Napi::CallbackInfo &info);
  Napi::Value stats(const Napi::CallbackInfo &info);
  Napi::Value memory(const Napi::CallbackInfo &info);
  Napi::Value dispose(const Napi::CallbackInfo &info);
  vt_engine *live(Napi::Env env);  // throws ERR_DISPOSED once disposed
  void forget();                   // leaves the live set and drops the cleanup hook
  static void on_env_cleanup(void *self);

  napi_env env_ = nullptr;
  vt_engine *engine_ = nullptr;
  TokenStream *stream_ = nullptr;
  bool hooked_ = false;  // the environment cleanup hook is registered
};

}  // namespace vtb
