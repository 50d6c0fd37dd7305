// The JS object for a loaded engine (one ObjectWrap per native object). Its methods are thin: argument
// checking and conversion on the JS thread, then a C ABI call. Blocking work (dispose) runs on a worker.
#pragma once

#include <napi.h>

#include "token_stream.h"
#include "vt_engine.h"

namespace vtb {

class EngineWrap : public Napi::ObjectWrap<EngineWrap> {
 public:
  static void init(Napi::Env env, Napi::Object exports);
  // Wraps a loaded engine; takes ownership of both.
  static Napi::Object create(Napi::Env env, vt_engine *engine, TokenStream *stream);

  explicit EngineWrap(const Napi::CallbackInfo &info);
  ~EngineWrap() override;

 private:
  Napi::Value model_info(const Napi::CallbackInfo &info);
  Napi::Value submit(const Napi::CallbackInfo &info);
  Napi::Value abort(const Napi::CallbackInfo &info);
  Napi::Value stats(const Napi::CallbackInfo &info);
  Napi::Value memory(const Napi::CallbackInfo &info);
  Napi::Value dispose(const Napi::CallbackInfo &info);
  vt_engine *live(Napi::Env env);  // throws ERR_DISPOSED once disposed

  vt_engine *engine_ = nullptr;
  TokenStream *stream_ = nullptr;
};

}  // namespace vtb
