// Registration only: the addon's exports and nothing else.
#include <napi.h>

#include "engine_wrap.h"
#include "live_set.h"
#include "workers/estimate_worker.h"
#include "workers/load_job.h"

static Napi::Object init(Napi::Env env, Napi::Object exports) {
  env.SetInstanceData(new vtb::LiveSet());  // deleted with the environment
  vtb::EngineWrap::init(env, exports);
  exports.Set("loadEngine", Napi::Function::New(env, &vtb::LoadJob::start, "loadEngine"));
  exports.Set("estimate", Napi::Function::New(env, &vtb::EstimateWorker::start, "estimate"));
  exports.Set("shutdownAll", Napi::Function::New(env, &vtb::shutdown_all, "shutdownAll"));
  return exports;
}

NODE_API_MODULE(vtengine, init)
