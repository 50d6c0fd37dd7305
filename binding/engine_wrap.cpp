#include "engine_wrap.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "errors.h"
#include "live_set.h"
#include "workers/dispose_worker.h"

namespace vtb {

namespace {

// Reads an optional number field; throws ERR_INVALID_OPTION on a present non-number.
double num(Napi::Env env, Napi::Object o, const char *key, double fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsNumber()) throw code_error(env, "ERR_INVALID_OPTION", std::string(key) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}
}  // namespace

void EngineWrap::init(Napi::Env env, Napi::Object exports) {
  Napi::Function cls = DefineClass(env, "NativeEngine",
                                   {InstanceMethod("modelInfo", &EngineWrap::model_info), InstanceMethod("submit", &EngineWrap::submit),
                                    InstanceMethod("abort", &EngineWrap::abort), InstanceMethod("allowTokens", &EngineWrap::allow_tokens),
                                    InstanceMethod("setPausedRequests", &EngineWrap::set_paused_requests),
                                    InstanceMethod("stats", &EngineWrap::stats),
                                    InstanceMethod("memory", &EngineWrap::memory),
                                    InstanceMethod("dispose", &EngineWrap::dispose)});
  LiveSet::of(env).engine_class = Napi::Persistent(cls);
}

Napi::Object EngineWrap::create(Napi::Env env, vt_engine *engine, TokenStream *stream) {
  LiveSet &live = LiveSet::of(env);
  Napi::Object obj = live.engine_class.New({});
  EngineWrap *w = EngineWrap::Unwrap(obj);
  w->env_ = env;
  w->engine_ = engine;
  w->stream_ = stream;
  vt_engine_set_step_callback(engine, &TokenStream::on_step, stream);
  // After the stream's thread-safe function exists, so this hook runs before the one that closes it.
  if (napi_add_env_cleanup_hook(env, &EngineWrap::on_env_cleanup, w) == napi_ok) w->hooked_ = true;
  live.engines.insert(w);
  return obj;
}

EngineWrap::EngineWrap(const Napi::CallbackInfo &info) : Napi::ObjectWrap<EngineWrap>(info) {}

// Garbage-collected without dispose(): stop the engine here (joins the step thread; it only queues events).
EngineWrap::~EngineWrap() { close(); }

void EngineWrap::close() {
  forget();
  if (engine_) vt_engine_free(engine_);
  engine_ = nullptr;
  if (stream_) stream_->release();
  stream_ = nullptr;
}

void EngineWrap::forget() {
  if (!env_) return;  // never created through create(), or already forgotten
  if (hooked_) napi_remove_env_cleanup_hook(env_, &EngineWrap::on_env_cleanup, this);
  hooked_ = false;
  LiveSet::of(Napi::Env(env_)).engines.erase(this);
  env_ = nullptr;
}

void EngineWrap::on_env_cleanup(void *self) {
  auto *w = static_cast<EngineWrap *>(self);
  w->hooked_ = false;  // Node removed the hook before running it
  w->close();
}

vt_engine *EngineWrap::live(Napi::Env env) {
  if (!engine_) throw code_error(env, "ERR_DISPOSED", "the engine has been disposed");
  return engine_;
}

Napi::Value EngineWrap::model_info(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  vt_model_info m{};
  vt_engine_model_info(live(env), &m);
  Napi::Object o = Napi::Object::New(env);
  o.Set("architecture", m.architecture);
  o.Set("device", m.device);
  o.Set("vocabSize", m.vocab_size);
  o.Set("hiddenSize", m.hidden_size);
  o.Set("nLayers", m.n_layers);
  o.Set("nHeads", m.n_heads);
  o.Set("nKvHeads", m.n_kv_heads);
  o.Set("headDim", m.head_dim);
  o.Set("maxContext", m.max_context);
  o.Set("maxPositionEmbeddings", m.max_position_embeddings);
  o.Set("bosTokenId", m.bos_token_id);
  Napi::Array eos = Napi::Array::New(env, m.n_eos);
  for (int i = 0; i < m.n_eos; ++i) eos.Set(uint32_t(i), m.eos_token_ids[i]);
  o.Set("eosTokenIds", eos);
  o.Set("nParams", double(m.n_params));
  o.Set("weightBytes", double(m.weight_bytes));
  o.Set("dtype", m.dtype);
  return o;
}

Napi::Value EngineWrap::submit(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  vt_engine *e = live(env);
  if (info.Length() < 2 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array ||
      !info[1].IsObject())
    throw code_error(env, "ERR_INVALID_OPTION", "submit(tokens: Int32Array, params: object)");
  Napi::Int32Array tokens = info[0].As<Napi::Int32Array>();
  Napi::Object o = info[1].As<Napi::Object>();
  vt_request_params p = vt_request_default_params();
  p.max_tokens = int32_t(num(env, o, "maxTokens", p.max_tokens));
  p.temperature = float(num(env, o, "temperature", p.temperature));
  p.top_k = int32_t(num(env, o, "topK", p.top_k));
  p.top_p = float(num(env, o, "topP", p.top_p));
  p.min_p = float(num(env, o, "minP", p.min_p));
  p.logprobs = int32_t(num(env, o, "logprobs", 0));
  double seed = num(env, o, "seed", NAN);
  if (!std::isnan(seed)) {
    p.has_seed = 1;
    p.seed = uint64_t(seed);
  }
  Napi::Value stop = o.Get("stopTokenIds");
  if (stop.IsArray()) {
    Napi::Array a = stop.As<Napi::Array>();
    if (a.Length() > VT_MAX_STOP_IDS) throw code_error(env, "ERR_INVALID_OPTION", "at most 16 stop token ids");
    p.n_stop_ids = int32_t(a.Length());
    for (uint32_t i = 0; i < a.Length(); ++i) p.stop_ids[i] = a.Get(i).As<Napi::Number>().Int32Value();
  }
  p.repetition_penalty = float(num(env, o, "repetitionPenalty", 1.0));
  p.presence_penalty = float(num(env, o, "presencePenalty", 0.0));
  p.frequency_penalty = float(num(env, o, "frequencyPenalty", 0.0));
  p.prompt_logprobs = o.Get("promptLogprobs").ToBoolean() ? 1 : 0;
  const double allowed = num(env, o, "allowedTokens", -1);
  if (!(allowed >= -1 && allowed <= 2147483647.0) || allowed != std::floor(allowed))
    throw code_error(env, "ERR_INVALID_OPTION", "allowedTokens must be an integer >= -1");
  p.allowed_tokens = int32_t(allowed);
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  Napi::Value bias = o.Get("logitBias");
  if (bias.IsArray()) {
    Napi::Array a = bias.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value pair = a.Get(i);
      if (!pair.IsArray() || pair.As<Napi::Array>().Length() != 2)
        throw code_error(env, "ERR_INVALID_OPTION", "logitBias entries must be [tokenId, bias] pairs");
      Napi::Array pr = pair.As<Napi::Array>();
      bias_ids.push_back(pr.Get(0u).ToNumber().Int32Value());
      bias_values.push_back(pr.Get(1u).ToNumber().FloatValue());
    }
  }
  p.n_logit_bias = int32_t(bias_ids.size());
  p.logit_bias_ids = bias_ids.data();
  p.logit_bias_values = bias_values.data();
  uint64_t id = 0;
  char err[1024] = {0};
  vt_status st = vt_engine_submit(e, tokens.Data(), int32_t(tokens.ElementLength()), p, &id, err, sizeof err);
  if (st != VT_OK) throw status_error(env, st, err);
  stream_->request_started(env);
  return Napi::Number::New(env, double(id));
}

Napi::Value EngineWrap::abort(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  vt_engine *e = live(env);
  if (info.Length() < 1 || !info[0].IsNumber()) throw code_error(env, "ERR_INVALID_OPTION", "abort(id: number)");
  vt_engine_abort(e, uint64_t(info[0].As<Napi::Number>().DoubleValue()));
  return env.Undefined();
}

Napi::Value EngineWrap::allow_tokens(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  vt_engine *e = live(env);
  const bool ok = info.Length() >= 2 && info[0].IsNumber() && info[1].IsNumber();
  const double id = ok ? info[0].As<Napi::Number>().DoubleValue() : 0, n = ok ? info[1].As<Napi::Number>().DoubleValue() : 0;
  // Checked as doubles: a cast of NaN or of a value out of range is undefined behaviour.
  if (!ok || !(id >= 1 && id <= 9007199254740991.0) || !(n >= -1 && n <= 2147483647.0) || n != std::floor(n))
    throw code_error(env, "ERR_INVALID_OPTION", "allowTokens(id: number, tokens: integer >= -1)");
  char err[256] = {0};
  vt_status st = vt_engine_allow_tokens(e, uint64_t(id), int32_t(n), err, sizeof err);
  if (st != VT_OK) throw status_error(env, st, err);
  return env.Undefined();
}

Napi::Value EngineWrap::set_paused_requests(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  live(env);
  const double n = info.Length() >= 1 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(n >= 0 && n <= 9007199254740991.0)) throw code_error(env, "ERR_INVALID_OPTION", "setPausedRequests(n: number >= 0)");
  stream_->set_paused(env, int64_t(n));
  return env.Undefined();
}

Napi::Value EngineWrap::stats(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  vt_engine_stats s{};
  vt_engine_stats_get(live(env), &s);
  Napi::Object o = Napi::Object::New(env);
  o.Set("kvBlocksTotal", s.kv_blocks_total);
  o.Set("kvBlocksUsed", s.kv_blocks_used);
  o.Set("kvBlockSize", s.kv_block_size);
  o.Set("kvCacheBytes", double(s.kv_cache_bytes));
  o.Set("requestsWaiting", s.requests_waiting);
  o.Set("requestsRunning", s.requests_running);
  o.Set("requestsPaused", s.requests_paused);
  o.Set("steps", double(s.steps));
  o.Set("tokensGenerated", double(s.tokens_generated));
  o.Set("preemptions", double(s.preemptions));
  o.Set("prefixCacheQueries", double(s.prefix_cache_queries));
  o.Set("prefixCacheQueryTokens", double(s.prefix_cache_query_tokens));
  o.Set("prefixCacheHitTokens", double(s.prefix_cache_hit_tokens));
  o.Set("prefixCacheBlocks", s.prefix_cache_blocks);
  o.Set("prefixCacheEvictions", double(s.prefix_cache_evictions));
  o.Set("kvBlocksMapped", s.kv_blocks_mapped);
  o.Set("kvCacheResidentBytes", double(s.kv_cache_resident_bytes));
  o.Set("stateSlotsTotal", s.state_slots_total);
  o.Set("stateSlotsMapped", s.state_slots_mapped);
  o.Set("stateSlotsHeld", s.state_slots_held);
  return o;
}

Napi::Value EngineWrap::memory(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  vt_memory_report m{};
  vt_engine_memory(live(env), &m);
  Napi::Object o = Napi::Object::New(env);
  o.Set("weightDeviceBytes", double(m.weight_device_bytes));
  o.Set("weightHostBytes", double(m.weight_host_bytes));
  o.Set("weightMappedBytes", double(m.weight_mapped_bytes));
  o.Set("weightMappedResidentBytes", double(m.weight_mapped_resident_bytes));
  o.Set("kvCacheBytes", double(m.kv_cache_bytes));
  o.Set("kvCacheResidentBytes", double(m.kv_cache_resident_bytes));
  o.Set("kvBlocksTotal", m.kv_blocks_total);
  o.Set("kvBlocksMapped", m.kv_blocks_mapped);
  o.Set("kvBlocksUsed", m.kv_blocks_used);
  o.Set("kvBlockSize", m.kv_block_size);
  o.Set("workspaceBytes", double(m.workspace_bytes));
  o.Set("graphsCount", m.graphs_count);
  o.Set("graphsBytes", double(m.graphs_bytes));
  o.Set("hostPinnedBytes", double(m.host_pinned_bytes));
  o.Set("stateSlotBytes", double(m.state_slot_bytes));
  o.Set("weightSkippedBytes", double(m.weight_skipped_bytes));
  o.Set("weightSkippedResidentBytes", double(m.weight_skipped_resident_bytes));
  o.Set("gpuDevice", m.gpu_device);
  o.Set("gpuTotalBytes", double(m.gpu_total_bytes));
  o.Set("gpuFreeBytes", double(m.gpu_free_bytes));
  o.Set("gpuUnifiedMemory", m.gpu_unified_memory != 0);
  // strnlen: the C side always terminates it, but a fixed-size field is read as one either way.
  o.Set("gpuName", Napi::String::New(env, m.gpu_name, strnlen(m.gpu_name, sizeof m.gpu_name)));
  return o;
}

Napi::Value EngineWrap::dispose(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  if (!engine_) {
    deferred.Resolve(env.Undefined());
    return deferred.Promise();
  }
  // Hand the engine and its stream to a worker: vt_engine_free joins the step thread, which may take a step's time.
  forget();
  auto *worker = new DisposeWorker(env, engine_, stream_, deferred);
  engine_ = nullptr;
  stream_ = nullptr;
  worker->Queue();
  return deferred.Promise();
}

}  // namespace vtb
