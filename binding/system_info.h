// addon.systemInfo(): vt_system_info_get as a plain JS object (lib/native/addon.ts: NativeSystemInfo).
#pragma once

#include <napi.h>

namespace vtb {

// Synchronous: it loads no model. The first call of a process may take as long as cuInit (about a second on a
// large GPU); later calls reuse the driver's cached answer.
Napi::Value system_info(const Napi::CallbackInfo &info);

}  // namespace vtb
