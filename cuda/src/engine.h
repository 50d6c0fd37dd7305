// The engine: owns the model, the KV cache, the scheduler and the step thread. Requests come in from any
// thread through a small locked inbox; the step thread alone touches the scheduler, the block manager and the
// model. Each step is: take the inbox → schedule → run the model → sample → hand every event to the callback.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "block_manager.h"
#include "kv_cache.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "memory_plan.h"
#include "model_runner.h"
#include "scheduler.h"
#include "vt_engine.h"

namespace vt {

class Engine {
 public:
  static std::unique_ptr<Engine> load(const std::string &dir, const vt_engine_params &params);
  // For tests: an engine over a given decoder (test/native/test_engine_overlap.cpp's fake one), with c's vocabulary
  // and EOS ids and plan's limits and KV pool shape; no checkpoint, no weights.
  static std::unique_ptr<Engine> with_decoder(std::unique_ptr<Decoder> decoder, const ModelConfig &c,
                                              const MemoryPlan &plan);
  ~Engine();  // stops the step thread: live requests end with VT_FINISH_ABORT events

  void set_step_callback(vt_step_fn fn, void *user);
  uint64_t submit(const int32_t *tokens, int32_t n, const vt_request_params &p);  // throws vt::Error
  void abort(uint64_t id);
  // Backpressure: request id may generate n_tokens in all (-1: no limit), then pauses until allowed more
  // (vt_engine_allow_tokens). Throws vt::Error for n_tokens < -1 or an id never issued.
  void allow_tokens(uint64_t id, int32_t n_tokens);
  vt_engine_stats stats();
  const vt_model_info &info() const { return info_; }
  vt_memory_report memory();
  static vt_memory_estimate estimate(const std::string &dir, const vt_engine_params &params);

 private:
  Engine() = default;
  // Everything after the decoder: block manager, scheduler, runner, the model info (config_, device_name_ and
  // dtype_name_ set first).
  void assemble(std::unique_ptr<Decoder> model, const MemoryPlan &plan);
  void start();
  void loop();
  void step();
  // The overlapped decode (ModelRunner::chainable): step() launches such a step and returns with it in
  // inflight_; the next step() launches the step after it (the same sequences one token further, their tokens the
  // picks still on the device) before it reads these picks (step_overlapped), so the device runs while the host
  // turns picks into events. dropped_: sequences of inflight_ that ended (length, stop token or abort, their event
  // already sent) while it ran: their row is ignored and they are removed once it is collected. A sequence whose
  // consumer allows no token after the one in flight (Sequence::allows) breaks the chain as an ending one does.
  void step_overlapped(std::vector<vt_step_event> &events);
  // Appends a picked token to s and writes it into ev; true when it ends the request (ev.finish set).
  bool accept(Sequence &s, const SampleResult &r, vt_step_event &ev);
  // A growing KV pool (Decoder::kv_chunk_blocks) gives its chunks back once the engine has been idle for
  // plan_.kv_trim_delay_ms: no request waits, runs, is paused or has a step in flight (trim_due), and none came
  // meanwhile (loop). It keeps kv_base_ blocks (what the load mapped) and the prefixes cached in them; the cached
  // blocks above are evicted (BlockManager::trim). One try per idle spell (trim_tried_), whatever it achieved.
  // The state slots that grow (Decoder::state_slot_chunk) are given back with the KV pool's chunks, down to
  // slots_base_ (what the load mapped).
  bool trim_due() const;
  void trim_pool();
  void note_slots();  // the state slots' counts for stats(), from the step thread
  // slots_ over n slots, growing through the decoder where it maps them in chunks.
  void make_state_slots(Decoder &d, int32_t n);
  bool trim_tried_ = false;
  // Ends every request of plan with an error event saying why (the step failed as a whole).
  void fail_plan(const std::vector<ScheduledChunk> &plan, const std::exception &ex, std::vector<vt_step_event> &events);
  void emit(std::vector<vt_step_event> &events);
  std::vector<ScheduledChunk> inflight_;
  std::unordered_set<uint64_t> dropped_;

  ModelConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::unique_ptr<KvCache> kv_;  // CPU backend only; the CUDA decoder owns its device KV pool
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<StateSlots> slots_;  // models whose layers keep a state slot (plan.n_state_slots), else null
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  vt_model_info info_{};
  std::string arch_name_, device_name_, dtype_name_;
  int32_t max_context_ = 0;
  MemoryPlan plan_;
  int64_t weight_host_bytes_ = 0, weight_mapped_bytes_ = 0, weight_device_bytes_ = 0;
  int64_t host_pinned_bytes_ = 0;  // page-locked host staging of the CUDA backend (CudaDecoder::pinned_bytes)
  int32_t kv_blocks_ = 0, kv_block_size_ = 0;
  int32_t kv_base_ = 0;  // a growing pool's blocks mapped at load, kept when idle (trim_when_idle)
  int32_t slots_base_ = 0;  // the same for the state slots
  int64_t state_slot_bytes_ = 0;  // the plan's: every slot (memory() reports what the decoder holds where it says)
  int64_t weight_skipped_bytes_ = 0;
  int64_t kv_bytes_ = 0, workspace_bytes_ = 0;  // kv_bytes_: the pool's ceiling (and the state slots), as reserved
  // The model's decoder (runner_ owns it): its backend's report, and a growing KV pool's chunks (step thread only).
  Decoder *decoder_ = nullptr;

  vt_step_fn callback_ = nullptr;
  void *callback_user_ = nullptr;

  // The inbox, shared with other threads.
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  std::unordered_set<uint64_t> aborts_;
  std::vector<std::pair<uint64_t, int32_t>> allowances_;  // (id, tokens allowed), applied in order
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  uint64_t seed_counter_ = 0x9E3779B97F4A7C15ull;

  std::atomic<int32_t> waiting_{0}, running_{0}, paused_{0};
  std::atomic<int64_t> steps_{0}, generated_{0}, preemptions_{0}, blocks_used_{0};
  std::atomic<int64_t> prefix_queries_{0}, prefix_query_tokens_{0}, prefix_hit_tokens_{0}, prefix_evictions_{0};
  std::atomic<int32_t> blocks_cached_{0};
  // The KV pool's blocks usable now and the memory they (and the state slots) hold: set on the step thread as it
  // grows and trims; -1: the decoder does not say (resident = reserved on a fixed device pool, mincore on the CPU).
  std::atomic<int32_t> blocks_mapped_{0};
  std::atomic<int64_t> kv_resident_{-1};
  std::atomic<int64_t> slot_resident_{-1};  // of kv_resident_, the state slots' (-1: state_slot_bytes_)
  std::atomic<int32_t> slots_mapped_{0}, slots_held_{0};  // the state slots, as the step thread last left them
  SamplerScratch sampler_scratch_;
  std::vector<int32_t> counts_scratch_;
  std::thread thread_;
};

}  // namespace vt
