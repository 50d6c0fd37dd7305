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
  return out;
}

}  // namespace vtb
