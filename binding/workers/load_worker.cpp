#include "workers/load_worker.h"

#include <cmath>

#include "engine_wrap.h"
#include "errors.h"
#include "params.h"

namespace vtb {

namespace {

struct Progress {
  float fraction;
  std::string stage;
};

}  // namespace

LoadWorker::LoadWorker(Napi::Env env, Napi::Promise::Deferred deferred)
    : Napi::AsyncWorker(env, "vtengine.load"), deferred_(deferred) {}

Napi::Value LoadWorker::start(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsString() || !info[1].IsObject() || !info[2].IsFunction() || !info[3].IsFunction() ||
      !info[4].IsTypedArray())
    throw code_error(env, "ERR_INVALID_OPTION", "loadEngine(dir, params, onProgress, onStep, cancel)");
  auto deferred = Napi::Promise::Deferred::New(env);
  auto *w = new LoadWorker(env, deferred);
  w->dir_ = info[0].As<Napi::String>().Utf8Value();
  Napi::Object p = info[1].As<Napi::Object>();
  w->params_ = engine_params_from(env, p);
  Napi::Int32Array cancel = info[4].As<Napi::Int32Array>();
  w->cancel_ref_ = Napi::Persistent(cancel);
  w->params_.cancel = cancel.Data();
  w->params_.progress = &LoadWorker::on_progress;
  w->params_.progress_user = w;
  w->on_step_ = Napi::Persistent(info[3].As<Napi::Function>());
  w->progress_ = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "vtengine.load.progress", 0, 1);
  w->Queue();
  return deferred.Promise();
}

void LoadWorker::on_progress(float fraction, const char *stage, void *user) {
  auto *w = static_cast<LoadWorker *>(user);
  auto *p = new Progress{fraction, stage};
  napi_status st = w->progress_.NonBlockingCall(p, [](Napi::Env env, Napi::Function fn, Progress *p) {
    if (env != nullptr) fn.Call({Napi::Number::New(env, p->fraction), Napi::String::New(env, p->stage)});
    delete p;
  });
  if (st != napi_ok) delete p;
}

void LoadWorker::Execute() {
  char err[2048] = {0};
  status_ = vt_engine_load(dir_.c_str(), params_, &engine_, err, sizeof err);
  if (status_ != VT_OK) {
    message_ = err;
    SetError(message_);
  }
}

void LoadWorker::finish_progress() {
  // Release, not abort: calls already queued are still delivered (lib/ ignores any that land after the promise settles).
  progress_.Release();
  cancel_ref_.Reset();
}

void LoadWorker::OnOK() {
  Napi::Env env = Env();
  finish_progress();
  TokenStream *stream = TokenStream::create(env, on_step_.Value());
  on_step_.Reset();
  deferred_.Resolve(EngineWrap::create(env, engine_, stream));
}

void LoadWorker::OnError(const Napi::Error &) {
  Napi::Env env = Env();
  finish_progress();
  on_step_.Reset();
  deferred_.Reject(status_error(env, status_, message_).Value());
}

}  // namespace vtb
