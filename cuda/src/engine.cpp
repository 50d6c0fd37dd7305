#include "engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>

#include "loader/weights.h"
#include "memory_plan.h"
#include "models/registry.h"
#include "backend/cpu/cpu_decoder.h"
#include "backend/cuda/cuda_decoder.h"
#include "backend/cuda/cuda_plan.h"
#include "status.h"

namespace vt {

namespace fs = std::filesystem;

namespace {

void check_option(bool ok, const std::string &what) {
  if (!ok) fail(VT_ERR_INVALID_OPTION, what);
}

// The resize a pool that grows (the KV blocks, the state slots) asks of the decoder: grow or trim to n. A backend
// error other than running out of memory (which growing reports by mapping less) must not escape the step thread:
// the pool stays as the decoder says it is (mapped()), and the scheduler works within it.
template <class Mapped, class Grow, class Trim>
std::function<int32_t(int32_t)> guarded_resize(const char *pool, const char *unit, Mapped mapped, Grow grow, Trim trim) {
  return [=](int32_t n) {
    try {
      return n > mapped() ? grow(n) : trim(n);
    } catch (const std::exception &ex) {
      std::fprintf(stderr, "vtengine: the %s could not be resized to %d %s: %s\n", pool, n, unit, ex.what());
      return mapped();
    }
  };
}

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::string &dir, const vt_engine_params &p) {
  auto progress = [&](float f, const char *stage) {
    if (p.cancel && *p.cancel) fail(VT_ERR_CANCELLED, "load cancelled");
    if (p.progress) p.progress(f, stage, p.progress_user);
  };
  // The backend: 'cuda' needs a usable GPU (never a silent CPU fallback); 'auto' takes one when there is one.
  const bool use_cuda = uses_cuda(p);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(VT_ERR_MODEL_NOT_FOUND, "checkpoint folder " + dir + " does not exist or is not a folder");

  std::unique_ptr<Engine> e(new Engine());
  progress(0.f, "config");
  e->config_ = load_model_config(dir);
  const ModelConfig &c = e->config_;
  plan_memory(c, p);  // validates the params before anything big happens
  progress(0.02f, "mapping");
  e->checkpoint_ = Checkpoint::open(dir);
  const WeightSchema schema = model_entry(c).schema(c);
  Weights w = bind_weights(c, schema, *e->checkpoint_, [&](int done, int total) {
    progress(0.05f + (use_cuda ? 0.05f : 0.85f) * float(done) / float(total), "weights");
  });
  // A vision tower or MTP head the language model never reads: its pages are dropped and the files read only
  // where the model's tensors lie (memory() reports what of the skipped bytes is resident: 0 unless another
  // process reads them).
  if (!schema.skipped_prefixes.empty()) e->checkpoint_->skip(schema.skipped_prefixes);
  // The plan reads the GPU's free memory under the context the decoder will use: held from here, it is made once.
  std::optional<CudaDeviceHold> hold;
  if (use_cuda) hold.emplace();
  const MemoryPlan plan = plan_memory_for(c, p, w.bytes);  // the KV pool may depend on the weights' size
  const int64_t n_params = w.n_params, weight_bytes = w.bytes;
  e->weight_skipped_bytes_ = w.skipped_bytes;
  const DType dtype = w.dtype;
  std::unique_ptr<Decoder> model;
  if (use_cuda) {
    // Weights, KV pool and activations on the GPU; the checkpoint's pages are released tensor by tensor.
    const CudaDecoderParams cp = cuda_decoder_params(plan, p);
    auto cm = std::make_unique<CudaDecoder>(c, w, e->checkpoint_.get(), cp, [&](const char *stage, int done, int total) {
      const bool weights = std::strcmp(stage, "weights") == 0;  // else the graphs, after them
      progress((weights ? 0.1f : 0.85f) + (weights ? 0.75f : 0.13f) * float(done) / float(total), stage);
    });
    e->weight_device_bytes_ = cm->weight_device_bytes();
    e->weight_host_bytes_ = 0;
    e->weight_mapped_bytes_ = 0;
    e->kv_bytes_ = cm->kv_bytes();
    e->workspace_bytes_ = cm->workspace_bytes();
    e->host_pinned_bytes_ = cm->pinned_bytes();
    e->device_name_ = "cuda";
    model = std::move(cm);
  } else {
    // Fail now, with the option to change, rather than half-way through serving: on the CPU backend the KV pool
    // and the workspaces are host memory (the weights are the checkpoint's page cache, reclaimable).
    const int64_t needed = plan.kv_cache_bytes + plan.state_slot_bytes + plan.workspace_bytes + w.host_bytes;
    const int64_t available = host_memory_available();
    if (available >= 0 && needed > available)
      fail(VT_ERR_OUT_OF_MEMORY, "this engine needs " + std::to_string(needed >> 20) + " MiB of host memory (KV cache " +
                                     std::to_string(plan.kv_cache_bytes >> 20) + " MiB for " +
                                     std::to_string(int64_t(plan.n_blocks) * plan.block_size) + " tokens, workspaces " +
                                     std::to_string(plan.workspace_bytes >> 20) + " MiB) but only " + std::to_string(available >> 20) +
                                     " MiB is available; lower maxContext" + (p.kv_cache_bytes > 0 ? " or kvCacheBytes" : "") +
                                     " (or maxSeqs / maxBatchTokens)");

    progress(0.92f, "kv cache");
    e->pool_ = std::make_unique<cpu::ThreadPool>(plan.n_threads);
    e->kv_ = std::make_unique<KvCache>(plan.state, plan.n_blocks, plan.block_size, plan.n_state_slots);
    e->kv_bytes_ = e->kv_->bytes();
    e->workspace_bytes_ = plan.workspace_bytes;
    e->weight_host_bytes_ = w.host_bytes;
    e->weight_mapped_bytes_ = w.bytes;
    e->device_name_ = "cpu";
    model = std::make_unique<CpuDecoder>(c, std::move(w), *e->pool_, *e->kv_, plan.max_batch_tokens);
  }
  e->state_slot_bytes_ = plan.state_slot_bytes;
  e->dtype_name_ = dtype_name(dtype);
  e->assemble(std::move(model), plan);
  e->info_.n_params = n_params;
  e->info_.weight_bytes = weight_bytes;

  progress(1.f, "ready");
  e->start();
  return e;
}

void Engine::assemble(std::unique_ptr<Decoder> model, const MemoryPlan &plan) {
  const ModelConfig &c = config_;
  plan_ = plan;
  max_context_ = plan.max_context;
  kv_block_size_ = plan.block_size;
  decoder_ = model.get();
  // A fixed pool holds what the decoder made of it (the plan's size, or its base where the device cannot map in
  // chunks); a growing one the plan's ceiling, of which the load mapped the base.
  const int32_t chunk = model->kv_chunk_blocks(), mapped = model->kv_mapped_blocks();
  kv_blocks_ = chunk == 0 && mapped >= 0 ? std::min(plan.n_blocks, mapped) : plan.n_blocks;
  blocks_ = std::make_unique<BlockManager>(kv_blocks_, plan.block_size, plan.prefix_caching);
  kv_base_ = kv_blocks_;
  if (chunk > 0) {
    kv_base_ = std::clamp(mapped, 0, kv_blocks_);
    Decoder *d = model.get();
    blocks_->set_growth(kv_base_, chunk, guarded_resize("KV pool", "blocks", [d] { return d->kv_mapped_blocks(); },
                                                        [d](int32_t n) { return d->grow_kv(n); },
                                                        [d](int32_t n) { return d->trim_kv(n); }));
  }
  blocks_mapped_ = blocks_->n_mapped();
  kv_resident_ = model->kv_resident_bytes();
  if (plan.n_state_slots > 0) make_state_slots(*model, plan.n_state_slots);
  slot_resident_ = model->state_slot_resident_bytes();
  note_slots();
  scheduler_ = std::make_unique<Scheduler>(SchedulerLimits{plan.max_seqs, plan.max_batch_tokens}, *blocks_, slots_.get());
  runner_ = std::make_unique<ModelRunner>(std::move(model), plan.block_size, c.vocab_size, plan.max_batch_tokens, plan.max_seqs);

  arch_name_ = c.architecture;
  vt_model_info &info = info_;
  info.architecture = arch_name_.c_str();
  info.device = device_name_.c_str();
  info.dtype = dtype_name_.c_str();
  info.vocab_size = c.vocab_size;
  info.hidden_size = c.hidden_size;
  info.n_layers = c.n_layers;
  info.n_heads = c.n_heads;
  info.n_kv_heads = c.n_kv_heads;
  info.head_dim = c.head_dim;
  info.max_context = plan.max_context;
  info.max_position_embeddings = c.max_position_embeddings;
  info.bos_token_id = c.bos_token_id;
  info.n_eos = int32_t(std::min<size_t>(c.eos_token_ids.size(), 8));
  for (int i = 0; i < info.n_eos; ++i) info.eos_token_ids[i] = c.eos_token_ids[i];
}

void Engine::make_state_slots(Decoder &d, int32_t n) {
  // As the KV pool: a fixed set holds what the decoder made of it (all n, or fewer where the device could not map in
  // chunks and the decoder kept its load-time slots); a growing one the plan's n, of which the load mapped the base.
  const int32_t chunk = d.state_slot_chunk(), mapped = d.state_slots_mapped();
  const int32_t total = chunk == 0 && mapped >= 0 ? std::min(n, mapped) : n;
  slots_ = std::make_unique<StateSlots>(total);
  slots_base_ = total;
  if (chunk == 0) return;
  slots_base_ = std::clamp(mapped, 0, total);
  Decoder *dp = &d;
  slots_->set_growth(slots_base_, chunk, guarded_resize("state slots", "slots", [dp] { return dp->state_slots_mapped(); },
                                                        [dp](int32_t n) { return dp->grow_state_slots(n); },
                                                        [dp](int32_t n) { return dp->trim_state_slots(n); }));
}

std::unique_ptr<Engine> Engine::with_decoder(std::unique_ptr<Decoder> decoder, const ModelConfig &c,
                                             const MemoryPlan &plan) {
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = c;
  e->device_name_ = "test", e->dtype_name_ = "none";
  e->assemble(std::move(decoder), plan);
  e->start();
  return e;
}

vt_memory_report Engine::memory() {
  vt_memory_report r{};
  r.weight_device_bytes = weight_device_bytes_;
  r.weight_host_bytes = weight_host_bytes_;
  r.weight_mapped_bytes = weight_mapped_bytes_;
  if (checkpoint_)  // (none under a test's decoder: with_decoder)
    for (const auto &f : checkpoint_->files()) r.weight_mapped_resident_bytes += f->resident_bytes();
  r.kv_cache_bytes = kv_bytes_;
  // CPU: the pages ever written (mincore); CUDA: the mapped chunks and the state slots (a fixed device pool is
  // resident once allocated).
  const int64_t resident = kv_resident_.load();
  r.kv_cache_resident_bytes = kv_ ? kv_->resident_bytes() : resident >= 0 ? resident : kv_bytes_;
  r.kv_blocks_total = kv_blocks_;
  r.kv_blocks_mapped = blocks_mapped_.load();
  const int64_t slots = slot_resident_.load();
  r.state_slot_bytes = slots >= 0 ? slots : state_slot_bytes_;
  r.weight_skipped_bytes = weight_skipped_bytes_;
  r.weight_skipped_resident_bytes = checkpoint_ ? checkpoint_->skipped_resident_bytes() : 0;
  r.kv_blocks_used = int32_t(blocks_used_.load());
  r.kv_block_size = kv_block_size_;
  r.workspace_bytes = workspace_bytes_;
  // The backend's figures, read now: the device's free bytes change, and with cudaGraphs.capture 'first-use' the
  // graphs are captured as steps first need them.
  const BackendReport b = decoder_->report();
  r.graphs_count = b.graphs;
  r.graphs_bytes = b.graph_bytes;
  r.host_pinned_bytes = host_pinned_bytes_;
  r.gpu_device = -1;
  r.gpu_total_bytes = r.gpu_free_bytes = -1;
  if (b.device >= 0) {
    r.gpu_device = b.device;
    r.gpu_total_bytes = b.total_bytes;
    r.gpu_free_bytes = b.free_bytes;
    r.gpu_unified_memory = b.unified_memory ? 1 : 0;
    std::snprintf(r.gpu_name, sizeof r.gpu_name, "%s", b.name.c_str());
  }
  return r;
}

vt_memory_estimate Engine::estimate(const std::string &dir, const vt_engine_params &p) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(VT_ERR_MODEL_NOT_FOUND, "checkpoint folder " + dir + " does not exist or is not a folder");
  const ModelConfig c = load_model_config(dir);
  plan_memory(c, p);  // validates the params before the files are opened
  auto ck = Checkpoint::open(dir);  // maps, reads only the headers and the small vectors bind_weights copies
  const Weights w = bind_weights(c, model_entry(c).schema(c), *ck, nullptr);
  const MemoryPlan plan = plan_memory_for(c, p, w.bytes);
  vt_memory_estimate est{};
  est.weight_bytes = w.bytes;
  // On the GPU every tensor is uploaded (norms and biases widened to fp32) and the file mappings released.
  est.weight_device_bytes = plan.cuda ? w.bytes : 0;
  est.weight_host_bytes = plan.cuda ? 0 : w.host_bytes;
  est.weight_mapped_bytes = plan.cuda ? 0 : w.bytes;
  est.kv_cache_bytes = plan.kv_cache_bytes + plan.state_slot_bytes;
  est.kv_cache_tokens = int64_t(plan.n_blocks) * plan.block_size;
  est.kv_cache_initial_bytes = plan.kv_base_bytes + plan.state_slot_base_bytes;
  est.kv_cache_initial_tokens = int64_t(plan.n_blocks_base) * plan.block_size;
  est.workspace_bytes = plan.workspace_bytes;
  est.max_context = plan.max_context;
  est.host_available_bytes = host_memory_available();
  est.host_pinned_bytes = plan.cuda ? plan.host_pinned_bytes : 0;
  est.state_slot_bytes = plan.state_slot_bytes;
  est.state_slot_initial_bytes = plan.state_slot_base_bytes;
  est.weight_skipped_bytes = w.skipped_bytes;
  return est;
}

void Engine::start() { thread_ = std::thread([this] { loop(); }); }

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::set_step_callback(vt_step_fn fn, void *user) {
  std::lock_guard<std::mutex> lock(mu_);
  callback_ = fn;
  callback_user_ = user;
}

uint64_t Engine::submit(const int32_t *tokens, int32_t n, const vt_request_params &p) {
  check_option(n >= 1 && tokens, "the prompt is empty: give at least one token");
  for (int32_t i = 0; i < n; ++i)
    check_option(tokens[i] >= 0 && tokens[i] < config_.vocab_size,
                 "token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) + " is outside the vocabulary [0, " +
                     std::to_string(config_.vocab_size) + ")");
  // A generation needs room for one new token; scoring (prompt_logprobs) may fill the context exactly.
  if (n > max_context_ || (n == max_context_ && !p.prompt_logprobs))
    fail(VT_ERR_CONTEXT_OVERFLOW, "the prompt has " + std::to_string(n) + " tokens; maxContext is " + std::to_string(max_context_) +
                                      ", which leaves no room to generate. Shorten the prompt or load with a larger maxContext");
  check_option(p.max_tokens >= 1, "maxTokens must be >= 1");
  check_option(std::isfinite(p.temperature) && p.temperature >= 0, "temperature must be a finite number >= 0");
  check_option(p.top_k >= 0, "topK must be >= 0");
  check_option(p.top_p > 0 && p.top_p <= 1, "topP must be in (0, 1]");
  check_option(p.min_p >= 0 && p.min_p <= 1, "minP must be in [0, 1]");
  check_option(p.logprobs >= 0 && p.logprobs <= VT_MAX_TOP_LOGPROBS, "logprobs must be between 0 and 20");
  check_option(p.n_stop_ids >= -1 && p.n_stop_ids <= VT_MAX_STOP_IDS, "at most 16 stop token ids");
  check_option(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0, "repetitionPenalty must be a finite number > 0");
  check_option(std::isfinite(p.presence_penalty) && std::isfinite(p.frequency_penalty), "presencePenalty and frequencyPenalty must be finite");
  check_option(p.allowed_tokens >= -1, "the tokens a request is allowed must be >= 0, or -1 for no limit; got " + std::to_string(p.allowed_tokens));
  check_option(p.n_logit_bias >= 0 && (p.n_logit_bias == 0 || (p.logit_bias_ids && p.logit_bias_values)), "logitBias is malformed");
  for (int32_t i = 0; i < p.n_logit_bias; ++i) {
    check_option(p.logit_bias_ids[i] >= 0 && p.logit_bias_ids[i] < config_.vocab_size,
                 "logitBias names token id " + std::to_string(p.logit_bias_ids[i]) + ", outside the vocabulary");
    check_option(std::isfinite(p.logit_bias_values[i]) || p.logit_bias_values[i] == -INFINITY,
                 "logitBias values must be finite (or -Infinity to ban a token)");
  }

  auto s = std::make_unique<Sequence>();
  s->tokens.assign(tokens, tokens + n);
  s->n_prompt = n;
  s->max_tokens = p.max_tokens;
  if (p.n_stop_ids < 0) s->stop_ids = config_.eos_token_ids;
  else s->stop_ids.assign(p.stop_ids, p.stop_ids + p.n_stop_ids);
  s->sampling = SamplingParams{p.temperature, p.top_k, p.top_p, p.min_p, p.logprobs};
  s->processors.repetition_penalty = p.repetition_penalty;
  s->processors.presence_penalty = p.presence_penalty;
  s->processors.frequency_penalty = p.frequency_penalty;
  for (int32_t i = 0; i < p.n_logit_bias; ++i) s->processors.logit_bias.emplace_back(p.logit_bias_ids[i], p.logit_bias_values[i]);
  s->prompt_logprobs = p.prompt_logprobs != 0;
  s->allowed_tokens = p.allowed_tokens;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) fail(VT_ERR_INVALID_OPTION, "the engine is shutting down");
  s->id = next_id_++;
  uint64_t seed = p.has_seed ? p.seed
                             : (seed_counter_ += 0x9E3779B97F4A7C15ull) ^
                                   uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  s->rng = Rng(seed);
  const uint64_t id = s->id;
  inbox_.push_back(std::move(s));
  waiting_.fetch_add(1);
  wake_.notify_one();
  return id;
}

void Engine::abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.insert(id);
  }
  wake_.notify_one();
}

void Engine::allow_tokens(uint64_t id, int32_t n_tokens) {
  check_option(n_tokens >= -1, "the tokens a request is allowed must be >= 0, or -1 for no limit; got " + std::to_string(n_tokens));
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A finished id is fine (its consumer may not know yet); one never issued is a caller's bug.
    check_option(id >= 1 && id < next_id_, "no request of this engine has id " + std::to_string(id));
    allowances_.emplace_back(id, n_tokens);
  }
  wake_.notify_one();
}

vt_engine_stats Engine::stats() {
  vt_engine_stats s{};
  s.kv_blocks_total = kv_blocks_;
  s.kv_blocks_used = int32_t(blocks_used_.load());
  s.kv_block_size = kv_block_size_;
  s.kv_cache_bytes = kv_bytes_;
  s.kv_blocks_mapped = blocks_mapped_.load();
  const int64_t resident = kv_resident_.load();
  s.kv_cache_resident_bytes = kv_ ? kv_->resident_bytes() : resident >= 0 ? resident : kv_bytes_;
  s.state_slots_total = slots_ ? slots_->n_slots() : 0;  // (fixed once the engine is assembled)
  s.state_slots_mapped = slots_mapped_.load();
  s.state_slots_held = slots_held_.load();
  s.requests_waiting = waiting_.load();
  s.requests_running = running_.load();
  s.requests_paused = paused_.load();
  s.steps = steps_.load();
  s.tokens_generated = generated_.load();
  s.preemptions = preemptions_.load();
  s.prefix_cache_queries = prefix_queries_.load();
  s.prefix_cache_query_tokens = prefix_query_tokens_.load();
  s.prefix_cache_hit_tokens = prefix_hit_tokens_.load();
  s.prefix_cache_blocks = blocks_cached_.load();
  s.prefix_cache_evictions = prefix_evictions_.load();
  return s;
}

void Engine::emit(std::vector<vt_step_event> &events) {
  blocks_used_ = blocks_->n_used();
  waiting_ = scheduler_->n_waiting();
  running_ = scheduler_->n_running();
  paused_ = scheduler_->n_paused();
  preemptions_ = scheduler_->preemptions();
  prefix_queries_ = scheduler_->prefix_queries();
  prefix_query_tokens_ = scheduler_->prefix_query_tokens();
  prefix_hit_tokens_ = scheduler_->prefix_hit_tokens();
  blocks_cached_ = blocks_->n_cached();
  prefix_evictions_ = blocks_->evictions();
  blocks_mapped_ = blocks_->n_mapped();
  kv_resident_ = decoder_->kv_resident_bytes();
  note_slots();  // (before the bytes: a reader that saw the new bytes sees the new counts)
  slot_resident_ = decoder_->state_slot_resident_bytes();
  if (events.empty()) return;
  vt_step_fn fn;
  void *user;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn = callback_;
    user = callback_user_;
  }
  if (fn) fn(events.data(), int32_t(events.size()), user);
  events.clear();
}

static vt_step_event finish_event(const Sequence &s, vt_finish why) {
  vt_step_event ev{};
  ev.request_id = s.id;
  ev.token = -1;
  ev.finish = why;
  ev.prompt_tokens = s.n_prompt;
  ev.completion_tokens = s.n_generated();
  return ev;
}

void Engine::step() {
  std::vector<vt_step_event> events;
  std::vector<std::unique_ptr<Sequence>> incoming;
  std::unordered_set<uint64_t> aborts;
  std::vector<std::pair<uint64_t, int32_t>> allowances;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
    aborts.swap(aborts_);
    allowances.swap(allowances_);
  }
  for (auto &s : incoming) scheduler_->add(std::move(s));
  // Before anything is planned or chained: the scheduler pauses and resumes by them, the chain checks them.
  for (auto [id, n] : allowances)
    if (Sequence *s = scheduler_->find(id)) s->allowed_tokens = n;
  for (uint64_t id : aborts) {
    auto it = std::find_if(inflight_.begin(), inflight_.end(), [id](const ScheduledChunk &c) { return c.seq->id == id; });
    if (it != inflight_.end()) {  // its step still runs: the event now, the removal once the step is collected
      if (dropped_.insert(id).second) events.push_back(finish_event(*it->seq, VT_FINISH_ABORT));
    } else if (auto s = scheduler_->remove(id)) {
      events.push_back(finish_event(*s, VT_FINISH_ABORT));
    }
  }
  if (!inflight_.empty()) return step_overlapped(events);

  std::vector<ScheduledChunk> plan = scheduler_->schedule();
  if (plan.empty()) {
    // Load-time sizing guarantees one sequence of maxContext tokens always fits (paused sequences give their
    // blocks back first), so an empty plan with work left is a bug; end that work loudly rather than spinning.
    // Paused sequences are not such work: they wait for their consumers.
    for (uint64_t id : scheduler_->active_ids()) {
      auto s = scheduler_->remove(id);
      vt_step_event ev = finish_event(*s, VT_FINISH_ERROR);
      ev.message = "internal error: the scheduler could not place this request";
      events.push_back(ev);
    }
    emit(events);
    return;
  }
  if (runner_->chainable(plan)) {  // launched now, its picks read by the next step() after it launches the one after
    try {
      runner_->launch_chained(plan, false);
      inflight_ = plan;
    } catch (const std::exception &ex) {
      fail_plan(plan, ex, events);
    }
    emit(events);
    return;
  }
  try {
    runner_->run(plan);
  } catch (const std::exception &ex) {
    fail_plan(plan, ex, events);
    emit(events);
    return;
  }
  scheduler_->commit(plan);
  ++steps_;

  int32_t row = 0;
  std::vector<uint64_t> finished;
  for (size_t ci = 0; ci < plan.size(); ++ci) {
    const ScheduledChunk &c = plan[ci];
    Sequence &s = *c.seq;
    vt_step_event ev{};
    ev.request_id = s.id;
    ev.token = -1;
    const std::vector<float> &plp = runner_->prompt_logprobs(ci);
    if (!plp.empty()) {
      ev.n_prompt_logprobs = int32_t(plp.size());
      ev.prompt_logprobs_start = runner_->prompt_logprobs_start(ci);
      ev.prompt_logprobs = plp.data();  // lives in the runner until the next step
    }
    if (!c.sample) {
      if (ev.n_prompt_logprobs) events.push_back(ev);
      continue;
    }
    SampleResult r;
    if (runner_->has_tokens()) {
      r = runner_->result(row++);  // picked on the device by sample()'s rules (ModelRunner::run)
    } else {
      float *logits = runner_->logits(row++);
      if (s.processors.active())
        apply_logits_processors(s.processors, s.tokens, s.n_prompt, logits, config_.vocab_size, counts_scratch_);
      r = sample(logits, config_.vocab_size, s.sampling, s.rng, sampler_scratch_);
    }
    if (accept(s, r, ev)) finished.push_back(s.id);
    events.push_back(ev);
  }
  for (uint64_t id : finished) scheduler_->remove(id);
  emit(events);
}

void Engine::step_overlapped(std::vector<vt_step_event> &events) {
  std::vector<ScheduledChunk> plan;
  plan.swap(inflight_);
  // The step after it, launched before its picks are read: the same sequences one token further, row for row (its
  // tokens are these picks where the device left them). Only when every sequence goes on: none ended while the step
  // ran, none ends with this pick whatever it is (length), each may generate the token after it (else it pauses
  // for its consumer), each has KV room (else the scheduler preempts), and no request waits to be admitted or to go
  // on from a pause; otherwise the next step is planned as usual once the picks are in.
  std::vector<ScheduledChunk> next;
  bool chain = !scheduler_->wants_in();
  for (size_t i = 0; chain && i < plan.size(); ++i) {
    const ScheduledChunk &c = plan[i];
    Sequence &s = *c.seq;
    chain = !dropped_.count(s.id) && s.n_generated() + 1 < s.max_tokens && s.allows(2) && c.pos0 + 2 < max_context_ &&
            blocks_->grow(s.block_table, int64_t(c.pos0) + 2);
    next.push_back({c.seq, c.pos0 + 1, 1, true});
  }
  if (!chain || !runner_->chainable(next)) next.clear();
  const std::vector<int32_t> *picks = nullptr;
  try {
    if (!next.empty()) runner_->launch_chained(next, true);
    picks = &runner_->collect_chained();
  } catch (const std::exception &ex) {
    fail_plan(plan, ex, events);  // next's sequences are plan's
    while (runner_->launched() > 0) {  // next, when it was launched: its read is dropped (and may fail as well)
      try {
        runner_->collect_chained();
      } catch (const std::exception &) {
      }
    }
    emit(events);
    return;
  }
  scheduler_->commit(plan);
  ++steps_;
  std::vector<uint64_t> finished;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence &s = *plan[i].seq;
    if (dropped_.count(s.id)) {  // ended while its step ran (then there is no next)
      finished.push_back(s.id);
      continue;
    }
    vt_step_event ev{};
    ev.request_id = s.id;
    SampleResult r;
    r.token = (*picks)[i];
    if (accept(s, r, ev)) {
      if (!next.empty()) dropped_.insert(s.id);  // its row of the step now running is ignored, then it goes
      else finished.push_back(s.id);
    }
    events.push_back(ev);
  }
  for (uint64_t id : finished) {
    scheduler_->remove(id);
    dropped_.erase(id);
  }
  inflight_ = std::move(next);
  emit(events);
}

bool Engine::accept(Sequence &s, const SampleResult &r, vt_step_event &ev) {
  s.tokens.push_back(r.token);
  ++generated_;
  ev.token = r.token;
  ev.logprob = r.logprob;
  ev.n_top = r.n_top;
  std::copy_n(r.top_ids, r.n_top, ev.top_ids);
  std::copy_n(r.top_logprobs, r.n_top, ev.top_logprobs);
  vt_finish why = VT_FINISH_NONE;
  if (std::find(s.stop_ids.begin(), s.stop_ids.end(), r.token) != s.stop_ids.end()) why = VT_FINISH_EOS;
  else if (s.n_generated() >= s.max_tokens || int32_t(s.tokens.size()) >= max_context_) why = VT_FINISH_LENGTH;
  if (why == VT_FINISH_NONE) return false;
  ev.finish = why;
  ev.prompt_tokens = s.n_prompt;
  ev.completion_tokens = s.n_generated();
  return true;
}

bool Engine::trim_due() const {
  const bool kv_grown = blocks_->grows() && blocks_->n_mapped() > kv_base_;
  const bool slots_grown = slots_ && slots_->grows() && slots_->n_mapped() > slots_base_;
  return (kv_grown || slots_grown) && !trim_tried_ && inflight_.empty() && scheduler_->n_waiting() == 0 &&
         scheduler_->n_running() == 0 && scheduler_->n_paused() == 0;
}

void Engine::trim_pool() {
  trim_tried_ = true;
  // (the decoder waits for its stream before it unmaps; errors leave the pool and the slots as they are)
  blocks_->trim(kv_base_);
  if (slots_) slots_->trim(slots_base_);
  blocks_mapped_ = blocks_->n_mapped();
  kv_resident_ = decoder_->kv_resident_bytes();
  note_slots();  // (before the bytes: a reader that saw the new bytes sees the new counts)
  slot_resident_ = decoder_->state_slot_resident_bytes();
  blocks_cached_ = blocks_->n_cached();
}

void Engine::note_slots() {
  slots_mapped_ = slots_ ? slots_->n_mapped() : 0;
  slots_held_ = slots_ ? slots_->n_held() : 0;
}

void Engine::fail_plan(const std::vector<ScheduledChunk> &plan, const std::exception &ex,
                       std::vector<vt_step_event> &events) {
  // The batch failed as a whole (for example an allocation): end its requests with the reason, keep serving.
  static thread_local std::string message;
  message = std::string("the engine failed while running this request: ") + ex.what();
  for (const auto &c : plan) {
    const uint64_t id = c.seq->id;
    auto s = scheduler_->remove(id);
    if (!s || dropped_.erase(id)) continue;  // (a dropped one has had its event)
    vt_step_event ev = finish_event(*s, VT_FINISH_ERROR);
    ev.message = message.c_str();
    events.push_back(ev);
  }
}

void Engine::loop() {
  for (;;) {
    bool trim = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto ready = [&] {
        return stopping_ || !inbox_.empty() || !aborts_.empty() || !allowances_.empty() || !scheduler_->idle();
      };
      // Idle with chunks to give back: they go if nothing comes within the delay (a burst that follows at once, as a
      // benchmark's timed run follows its warm-up, finds them still mapped).
      if (trim_due()) trim = !wake_.wait_for(lock, std::chrono::milliseconds(plan_.kv_trim_delay_ms), ready);
      else wake_.wait(lock, ready);
      if (stopping_) break;
    }
    if (trim) {
      trim_pool();
    } else {
      trim_tried_ = false;
      step();
    }
  }
  // Shutting down: every request still known ends with an abort event, so no caller waits forever.
  std::vector<vt_step_event> events;
  std::vector<std::unique_ptr<Sequence>> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
  }
  for (auto &s : incoming) events.push_back(finish_event(*s, VT_FINISH_ABORT));
  for (uint64_t id : scheduler_->ids())
    if (auto s = scheduler_->remove(id); s && !dropped_.count(id)) events.push_back(finish_event(*s, VT_FINISH_ABORT));
  emit(events);
}

}  // namespace vt
