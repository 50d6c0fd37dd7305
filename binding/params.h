// JS load options (already validated by lib/engine/load-options.ts) → vt_engine_params, shared by load and estimate.
#pragma once

#include <napi.h>

#include "vt_engine.h"

namespace vtb {

vt_engine_params engine_params_from(Napi::Env env, Napi::Object p);

}  // namespace vtb
