// Registration only: the addon's exports and nothing else.
#include <napi.h>

#include "engine_wrap.h"
#include "workers/estimate_worker.h"
#include "workers/load_worker.h"

static Napi::Object init(Napi::Env env, Napi::Object exports) {
  vtb::EngineWrap::init(env, exports);
  exports.Set("loadEngine", Napi::Function::New(env, &vtb::LoadWorker::start, "loadEngine"));
  exports.Set("estimate", Napi::Function::New(env, &vtb::EstimateWorker::start, "estimate"));
  return exports;
}

NODE_API_MODULE(vtengine, init)
