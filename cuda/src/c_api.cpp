// The C ABI (vt_engine.h) over vt::Engine: every entry point catches everything, so no C++ exception and no
// bad input ever crosses into the caller as anything but a status and a message.
#include <cstring>
#include <new>
#include <string>

#include "engine.h"
#include "heap_trim.h"
#include "lifecycle_thread.h"
#include "status.h"
#include "vt_engine.h"

struct vt_engine {
  std::unique_ptr<vt::Engine> impl;
};

namespace {

vt_status report(vt_status s, const char *msg, char *err, size_t cap) {
  if (err && cap) {
    std::strncpy(err, msg, cap - 1);
    err[cap - 1] = '\0';
  }
  return s;
}

template <typename F>
vt_status guarded(char *err, size_t cap, F &&f) {
  try {
    f();
    return VT_OK;
  } catch (const vt::Error &e) {
    return report(e.status(), e.what(), err, cap);
  } catch (const std::bad_alloc &) {
    return report(VT_ERR_OUT_OF_MEMORY, "out of host memory", err, cap);
  } catch (const std::exception &e) {
    return report(VT_ERR_INTERNAL, e.what(), err, cap);
  } catch (...) {
    return report(VT_ERR_INTERNAL, "unknown internal error", err, cap);
  }
}

}  // namespace

extern "C" {

vt_engine_params vt_engine_default_params(void) {
  vt_engine_params p{};
  p.device = VT_DEVICE_AUTO;
  p.cuda_graphs.enabled = -1;
  return p;
}

vt_request_params vt_request_default_params(void) {
  vt_request_params p{};
  p.max_tokens = 256;
  p.temperature = 0.f;
  p.top_p = 1.f;
  p.n_stop_ids = -1;
  p.repetition_penalty = 1.f;
  p.allowed_tokens = -1;
  return p;
}

vt_status vt_engine_load(const char *dir, vt_engine_params params, vt_engine **out, char *err, size_t err_cap) {
  if (!out) return report(VT_ERR_INVALID_OPTION, "out is NULL", err, err_cap);
  *out = nullptr;
  if (!dir) return report(VT_ERR_INVALID_OPTION, "dir is NULL", err, err_cap);
  return guarded(err, err_cap, [&] {
    vt::on_lifecycle_thread([&] {  // lifecycle_thread.h: one malloc arena for every load and teardown
      auto e = vt::Engine::load(dir, params);
      *out = new vt_engine{std::move(e)};
    });
  });
}

void vt_engine_free(vt_engine *engine) {
  // Nothing here throws, and a hand-over that cannot get a thread runs it inline (lifecycle_thread.cpp).
  vt::on_lifecycle_thread([engine] {
    delete engine;
    vt::return_free_heap();  // what the engine's threads freed into their arenas goes back (heap_trim.h)
  });
}

vt_status vt_engine_model_info(const vt_engine *engine, vt_model_info *out) {
  if (!engine || !out) return VT_ERR_INVALID_OPTION;
  *out = engine->impl->info();
  return VT_OK;
}

vt_status vt_engine_set_step_callback(vt_engine *engine, vt_step_fn fn, void *user) {
  if (!engine) return VT_ERR_INVALID_OPTION;
  engine->impl->set_step_callback(fn, user);
  return VT_OK;
}

vt_status vt_engine_submit(vt_engine *engine, const int32_t *tokens, int32_t n_tokens, vt_request_params params,
                           uint64_t *out_request_id, char *err, size_t err_cap) {
  if (!engine || !out_request_id) return report(VT_ERR_INVALID_OPTION, "engine or out_request_id is NULL", err, err_cap);
  return guarded(err, err_cap, [&] { *out_request_id = engine->impl->submit(tokens, n_tokens, params); });
}

void vt_engine_abort(vt_engine *engine, uint64_t request_id) {
  if (engine) engine->impl->abort(request_id);
}

vt_status vt_engine_allow_tokens(vt_engine *engine, uint64_t request_id, int32_t n_tokens, char *err, size_t err_cap) {
  if (!engine) return report(VT_ERR_INVALID_OPTION, "engine is NULL", err, err_cap);
  return guarded(err, err_cap, [&] { engine->impl->allow_tokens(request_id, n_tokens); });
}

vt_status vt_engine_stats_get(vt_engine *engine, vt_engine_stats *out) {
  if (!engine || !out) return VT_ERR_INVALID_OPTION;
  *out = engine->impl->stats();
  return VT_OK;
}

vt_status vt_engine_memory(vt_engine *engine, vt_memory_report *out) {
  if (!engine || !out) return VT_ERR_INVALID_OPTION;
  *out = engine->impl->memory();
  return VT_OK;
}

vt_status vt_engine_estimate(const char *dir, vt_engine_params params, vt_memory_estimate *out, char *err, size_t err_cap) {
  if (!dir || !out) return report(VT_ERR_INVALID_OPTION, "dir or out is NULL", err, err_cap);
  return guarded(err, err_cap, [&] { *out = vt::Engine::estimate(dir, params); });
}

const char *vt_status_name(vt_status s) {
  switch (s) {
    case VT_OK: return "OK";
    case VT_ERR_MODEL_NOT_FOUND: return "ERR_MODEL_NOT_FOUND";
    case VT_ERR_BAD_CHECKPOINT: return "ERR_BAD_CHECKPOINT";
    case VT_ERR_UNSUPPORTED_ARCH: return "ERR_UNSUPPORTED_ARCH";
    case VT_ERR_UNSUPPORTED_DTYPE: return "ERR_UNSUPPORTED_DTYPE";
    case VT_ERR_SHAPE_MISMATCH: return "ERR_SHAPE_MISMATCH";
    case VT_ERR_INVALID_OPTION: return "ERR_INVALID_OPTION";
    case VT_ERR_CONTEXT_OVERFLOW: return "ERR_CONTEXT_OVERFLOW";
    case VT_ERR_OUT_OF_MEMORY: return "ERR_OUT_OF_MEMORY";
    case VT_ERR_NO_GPU: return "ERR_NO_GPU";
    case VT_ERR_CANCELLED: return "ERR_CANCELLED";
    case VT_ERR_INTERNAL: return "ERR_INTERNAL";
    case VT_ERR_MISSING_FILE: return "ERR_MISSING_FILE";
    case VT_ERR_TRUNCATED_CHECKPOINT: return "ERR_TRUNCATED_CHECKPOINT";
  }
  return "ERR_INTERNAL";
}

}  // extern "C"
