#include "workers/load_job.h"

#include <memory>

#include "engine_wrap.h"
#include "errors.h"
#include "live_set.h"
#include "params.h"

namespace vtb {

namespace {

// What the load thread posts: a progress tick, or (stage empty, last) the end of the load.
struct Call {
  float fraction;
  std::string stage;
  bool end;
};

}  // namespace

LoadJob::LoadJob(Napi::Env env) : env_(env), deferred_(Napi::Promise::Deferred::New(env)) {}

Napi::Value LoadJob::start(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsString() || !info[1].IsObject() || !info[2].IsFunction() || !info[3].IsFunction() ||
      !info[4].IsTypedArray())
    throw code_error(env, "ERR_INVALID_OPTION", "loadEngine(dir, params, onProgress, onStep, cancel)");
  auto *job = new LoadJob(env);
  job->dir_ = info[0].As<Napi::String>().Utf8Value();
  try {
    job->params_ = engine_params_from(env, info[1].As<Napi::Object>());
  } catch (...) {
    delete job;
    throw;
  }
  Napi::Int32Array cancel = info[4].As<Napi::Int32Array>();
  job->cancel_ref_ = Napi::Persistent(cancel);
  job->cancel_flag_ = cancel.Data();
  job->params_.cancel = job->cancel_flag_;
  job->params_.progress = &LoadJob::on_progress;
  job->params_.progress_user = job;
  job->on_step_ = Napi::Persistent(info[3].As<Napi::Function>());
  // Ref'd while the load runs: a pending load keeps the process alive, as any pending promise of Node's would.
  job->calls_ = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "vtengine.load", 0, 1,
                                              [](Napi::Env, LoadJob *j) { delete j; }, job);
  Napi::Promise promise = job->deferred_.Promise();
  // After the thread-safe function exists, so this hook runs before the one that closes it (last in, first out).
  if (napi_add_env_cleanup_hook(env, &LoadJob::on_env_cleanup, job) == napi_ok) job->hooked_ = true;
  LiveSet::of(env).loads.insert(job);
  job->thread_ = std::thread(&LoadJob::run, job);
  return promise;
}

void LoadJob::run() {
  char err[2048] = {0};
  status_ = vt_engine_load(dir_.c_str(), params_, &engine_, err, sizeof err);
  if (status_ != VT_OK) message_ = err;
  auto *end = new Call{1.f, "", true};
  napi_status st = calls_.NonBlockingCall(end, [this](Napi::Env env, Napi::Function, Call *c) {
    delete c;
    if (env != nullptr) settle(env);
  });
  if (st != napi_ok) delete end;  // the environment is closing the function: abandon() frees what was loaded
}

void LoadJob::on_progress(float fraction, const char *stage, void *user) {
  auto *job = static_cast<LoadJob *>(user);
  auto *c = new Call{fraction, stage, false};
  napi_status st = job->calls_.NonBlockingCall(c, [](Napi::Env env, Napi::Function fn, Call *c) {
    std::unique_ptr<Call> owned(c);
    if (env != nullptr) fn.Call({Napi::Number::New(env, owned->fraction), Napi::String::New(env, owned->stage)});
  });
  if (st != napi_ok) delete c;
}

void LoadJob::leave() {
  if (hooked_) napi_remove_env_cleanup_hook(env_, &LoadJob::on_env_cleanup, this);
  hooked_ = false;
  LiveSet::of(Napi::Env(env_)).loads.erase(this);
  cancel_ref_.Reset();
}

void LoadJob::settle(Napi::Env env) {
  if (done_) return;  // abandoned
  done_ = true;
  thread_.join();  // its last act was posting this call
  leave();
  calls_.Release();  // the finalizer deletes this job once the call in hand returns
  if (status_ != VT_OK) {
    on_step_.Reset();
    deferred_.Reject(status_error(env, status_, message_).Value());
    return;
  }
  vt_engine *engine = engine_;
  engine_ = nullptr;
  TokenStream *stream = nullptr;
  Napi::Object obj;
  try {
    stream = TokenStream::create(env, on_step_.Value());
    obj = EngineWrap::create(env, engine, stream);
  } catch (...) {
    // No JS object owns the engine (the environment can no longer make one): free it here.
    vt_engine_free(engine);
    if (stream) stream->release();
    throw;
  }
  on_step_.Reset();
  deferred_.Resolve(obj);
}

void LoadJob::abandon() {
  if (done_) return;
  done_ = true;
  __atomic_store_n(cancel_flag_, 1, __ATOMIC_RELAXED);
  if (thread_.joinable()) thread_.join();  // prompt: the load checks the flag at every tensor
  if (engine_) vt_engine_free(engine_);     // it finished before it saw the flag
  engine_ = nullptr;
  leave();
  on_step_.Reset();
  calls_.Release();  // the finalizer deletes this job; the end call still queued is dropped unseen
}

void LoadJob::on_env_cleanup(void *self) {
  auto *job = static_cast<LoadJob *>(self);
  job->hooked_ = false;  // Node removed it before running it
  job->abandon();
}

}  // namespace vtb
