#include "live_set.h"

#include <vector>

#include "engine_wrap.h"
#include "workers/load_job.h"

namespace vtb {

LiveSet &LiveSet::of(Napi::Env env) { return *env.GetInstanceData<LiveSet>(); }

void LiveSet::shutdown_all() {
  // abandon() and close() leave the sets: iterate over copies.
  for (LoadJob *j : std::vector<LoadJob *>(loads.begin(), loads.end())) j->abandon();
  for (EngineWrap *e : std::vector<EngineWrap *>(engines.begin(), engines.end())) e->close();
}

Napi::Value shutdown_all(const Napi::CallbackInfo &info) {
  LiveSet::of(info.Env()).shutdown_all();
  return info.Env().Undefined();
}

}  // namespace vtb
