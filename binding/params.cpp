#include "params.h"

#include <string>

#include "errors.h"

namespace vtb {

namespace {
int32_t int_field(Napi::Env env, Napi::Object o, const char *key) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return 0;
  if (!v.IsNumber()) throw code_error(env, "ERR_INVALID_OPTION", std::string(key) + " must be a number");
  return v.As<Napi::Number>().Int32Value();
}

// cudaGraphs as load-options.ts shapes it ({ enabled: -1 | 0 | 1, maxBatch, buckets, dedup, firstUse }). Whatever is absent
// keeps vt_engine_default_params()'s value, so the default stays "on"; the ranges are checked by plan_memory.
void cuda_graphs_from(Napi::Env env, Napi::Value v, vt_cuda_graphs *g) {
  if (v.IsUndefined()) return;
  if (!v.IsObject()) throw code_error(env, "ERR_INVALID_OPTION", "cudaGraphs must be an object");
  Napi::Object o = v.As<Napi::Object>();
  if (!o.Get("enabled").IsUndefined()) g->enabled = int_field(env, o, "enabled");
  g->max_batch = int_field(env, o, "maxBatch");
  Napi::Value b = o.Get("buckets");
  if (!b.IsUndefined()) {
    if (!b.IsArray()) throw code_error(env, "ERR_INVALID_OPTION", "cudaGraphs.buckets must be an array");
    Napi::Array a = b.As<Napi::Array>();
    constexpr uint32_t cap = sizeof g->buckets / sizeof g->buckets[0];
    if (a.Length() > cap)
      throw code_error(env, "ERR_INVALID_OPTION", "cudaGraphs.buckets holds at most " + std::to_string(cap) + " batch sizes");
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value x = a.Get(i);
      if (!x.IsNumber()) throw code_error(env, "ERR_INVALID_OPTION", "cudaGraphs.buckets must hold numbers");
      g->buckets[i] = x.As<Napi::Number>().Int32Value();
    }
    g->n_buckets = int32_t(a.Length());
  }
  Napi::Value dedup = o.Get("dedup");
  if (!dedup.IsUndefined() && !dedup.IsBoolean()) throw code_error(env, "ERR_INVALID_OPTION", "cudaGraphs.dedup must be a boolean");
  g->dedup = dedup.IsBoolean() && dedup.As<Napi::Boolean>().Value() ? 1 : 0;
  Napi::Value first_use = o.Get("firstUse");
  if (!first_use.IsUndefined() && !first_use.IsBoolean())
    throw code_error(env, "ERR_INVALID_OPTION", "cudaGraphs.firstUse must be a boolean");
  g->first_use = first_use.IsBoolean() && first_use.As<Napi::Boolean>().Value() ? 1 : 0;
}
}  // namespace

vt_engine_params engine_params_from(Napi::Env env, Napi::Object p) {
  vt_engine_params out = vt_engine_default_params();
  std::string device = p.Get("device").IsString() ? p.Get("device").As<Napi::String>().Utf8Value() : "auto";
  out.device = device == "cpu" ? VT_DEVICE_CPU : device == "cuda" ? VT_DEVICE_CUDA : VT_DEVICE_AUTO;
  out.n_threads = int_field(env, p, "threads");
  out.max_context = int_field(env, p, "maxContext");
  out.max_seqs = int_field(env, p, "maxSeqs");
  out.max_batch_tokens = int_field(env, p, "maxBatchTokens");
  out.kv_block_size = int_field(env, p, "kvBlockSize");
  Napi::Value kvb = p.Get("kvCacheBytes");
  out.kv_cache_bytes = kvb.IsNumber() ? int64_t(kvb.As<Napi::Number>().DoubleValue()) : 0;
  std::string dtype = p.Get("dtype").IsString() ? p.Get("dtype").As<Napi::String>().Utf8Value() : "auto";
  out.dtype = dtype == "float32" ? VT_DTYPE_FLOAT32 : dtype == "bfloat16" ? VT_DTYPE_BFLOAT16 : VT_DTYPE_AUTO;
  cuda_graphs_from(env, p.Get("cudaGraphs"), &out.cuda_graphs);
  Napi::Value util = p.Get("gpuMemoryUtilization");
  out.gpu_memory_utilization = util.IsNumber() ? util.As<Napi::Number>().DoubleValue() : 0;
  Napi::Value caching = p.Get("prefixCaching");
  if (!caching.IsUndefined() && !caching.IsBoolean()) throw code_error(env, "ERR_INVALID_OPTION", "prefixCaching must be a boolean");
  if (caching.IsBoolean()) out.prefix_caching = caching.As<Napi::Boolean>().Value() ? 1 : -1;  // absent: the default (on)
  return out;
}

}  // namespace vtb
