// What one Node environment (the main thread or a worker thread) has alive: its loaded engines and its loads in
// flight. A process can end without anyone calling dispose(): the script simply ends, process.exit(), an uncaught
// exception, worker.terminate(). An engine's step thread must be stopped before Node closes the thread-safe
// function it posts to, or it posts into freed memory (SIGSEGV / SIGABRT at exit, or a hang in the finalizer).
// Two ways in, both stopping everything synchronously:
//   - lib/ calls shutdownAll() from process.on('exit') (process.exit(), an uncaught exception, the natural end:
//     Node's exit() then skips the environment's cleanup, so this is the last chance);
//   - each engine's environment cleanup hook (worker.terminate(), embedders such as Electron that tear the
//     environment down), registered after its thread-safe function's own hook, so that it runs first (Node runs
//     cleanup hooks last-in first-out).
#pragma once

#include <napi.h>

#include <unordered_set>

namespace vtb {

class EngineWrap;
class LoadJob;

struct LiveSet {
  Napi::FunctionReference engine_class;  // NativeEngine's constructor
  std::unordered_set<EngineWrap *> engines;
  std::unordered_set<LoadJob *> loads;

  // The environment's set (the addon's instance data).
  static LiveSet &of(Napi::Env env);
  // Stops every load in flight and every engine (joining their threads). Synchronous.
  void shutdown_all();
};

// JS: shutdownAll(), for process.on('exit').
Napi::Value shutdown_all(const Napi::CallbackInfo &info);

}  // namespace vtb
