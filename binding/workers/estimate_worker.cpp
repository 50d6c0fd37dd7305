#include "workers/estimate_worker.h"

#include "errors.h"
#include "params.h"

namespace vtb {

Napi::Value EstimateWorker::start(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsObject())
    throw code_error(env, "ERR_INVALID_OPTION", "estimate(dir, params)");
  auto deferred = Napi::Promise::Deferred::New(env);
  auto *w = new EstimateWorker(env, deferred);
  w->dir_ = info[0].As<Napi::String>().Utf8Value();
  w->params_ = engine_params_from(env, info[1].As<Napi::Object>());
  w->Queue();
  return deferred.Promise();
}

void EstimateWorker::Execute() {
  char err[2048] = {0};
  status_ = vt_engine_estimate(dir_.c_str(), params_, &result_, err, sizeof err);
  if (status_ != VT_OK) {
    message_ = err;
    SetError(message_);
  }
}

void EstimateWorker::OnOK() {
  Napi::Env env = Env();
  const vt_memory_estimate &e = result_;
  Napi::Object o = Napi::Object::New(env);
  o.Set("weightBytes", double(e.weight_bytes));
  o.Set("weightDeviceBytes", double(e.weight_device_bytes));
  o.Set("weightHostBytes", double(e.weight_host_bytes));
  o.Set("weightMappedBytes", double(e.weight_mapped_bytes));
  o.Set("kvCacheBytes", double(e.kv_cache_bytes));
  o.Set("kvCacheTokens", double(e.kv_cache_tokens));
  o.Set("kvCacheInitialBytes", double(e.kv_cache_initial_bytes));
  o.Set("stateSlotBytes", double(e.state_slot_bytes));
  o.Set("stateSlotInitialBytes", double(e.state_slot_initial_bytes));
  o.Set("weightSkippedBytes", double(e.weight_skipped_bytes));
  o.Set("kvCacheInitialTokens", double(e.kv_cache_initial_tokens));
  o.Set("workspaceBytes", double(e.workspace_bytes));
  o.Set("maxContext", e.max_context);
  o.Set("hostAvailableBytes", double(e.host_available_bytes));
  o.Set("hostPinnedBytes", double(e.host_pinned_bytes));
  deferred_.Resolve(o);
}

void EstimateWorker::OnError(const Napi::Error &) { deferred_.Reject(status_error(Env(), status_, message_).Value()); }

}  // namespace vtb
