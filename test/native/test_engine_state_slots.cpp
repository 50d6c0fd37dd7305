// Per-sequence state slots (issue 21 point 4: models/state_layout.h, state_slots.h, the scheduler's admission), the
// engine's side without a recurrent model: an engine over a fake decoder (Engine::with_decoder) whose "model" is a
// recurrence kept in the state slot the engine hands each sequence, state = mix(state, token) per position and
// next = state mod vocab, so a request's every token depends on all the tokens before it. A slot handed to two
// sequences at once, one not reset when a sequence starts again from position 0 (after a preemption, or its state
// taken back while paused), or a sequence given another's slot mid-way changes its tokens; each request's tokens
// are checked against the recurrence run here on its own. The decoder also checks, per slot, that each chunk starts
// where the slot's last one ended. Also: StateLayout's arithmetic and the CPU KvCache's addressing by it.
//
// Slots that grow (Decoder::state_slot_chunk: the CUDA decoder's, mapped in chunks as sequences take them): the
// decoder maps chunks as the engine asks, up to what its "device" has memory for, forgets the state of the slots it
// unmaps, and records any step that uses a slot outside the mapped ones. When the device runs out requests wait for
// a slot and all finish with the recurrence's tokens; once idle the engine gives the chunks above the base back.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "engine.h"
#include "kv_cache.h"
#include "memory_plan.h"
#include "fake_engine.h"
#include "models/decoder.h"
#include "models/state_layout.h"

using namespace vt;
using fake_engine::Events;
using fake_engine::FakeDecoder;

namespace {

constexpr int32_t kVocab = 64;
constexpr int64_t kSlotBytes = 3 * sizeof(float);  // the layout's one recurrent layer keeps 3 values
constexpr int64_t kMod = 2147483647;  // 2^31 - 1

int64_t mix(int64_t state, int32_t token) { return (state * 1000003 + token + 1) % kMod; }
int32_t pick(int64_t state) { return int32_t(state % kVocab); }

// What a request gets from the recurrence: the state over the prompt, then each pick fed back.
std::vector<int32_t> expected(const std::vector<int32_t> &prompt, int32_t max_tokens) {
  int64_t s = 0;
  for (int32_t t : prompt) s = mix(s, t);
  std::vector<int32_t> out;
  while (int32_t(out.size()) < max_tokens) {
    out.push_back(pick(s));
    s = mix(s, out.back());
  }
  return out;
}

class RecurrentDecoder : public FakeDecoder {
 public:
  // chunk > 0: the slots grow in chunks of that many, the first chunk mapped at load, up to `capacity` slots.
  RecurrentDecoder(int32_t n_slots, bool chaining, int32_t chunk = 0, int32_t capacity = 0)
      : FakeDecoder(kVocab, chaining, 8), state_(size_t(n_slots), -1), next_pos_(size_t(n_slots), -1), n_slots_(n_slots),
        chunk_(chunk), capacity_(capacity), mapped_(chunk > 0 ? std::min(chunk, n_slots) : n_slots) {}
  int max_distinct_slots = 0, fresh_starts = 0;
  std::vector<std::string> violations;

  int32_t state_slot_chunk() const override { return chunk_; }
  int32_t state_slots_mapped() const override { return chunk_ > 0 ? mapped_.load() : -1; }
  int32_t grow_state_slots(int32_t slots) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++grows;
    args_ok &= slots > mapped_ && slots <= n_slots_ && (slots % chunk_ == 0 || slots == n_slots_);
    while (mapped_ < slots) {  // chunk by chunk, until the device's memory ends
      const int32_t next = std::min(n_slots_, (mapped_ / chunk_ + 1) * chunk_);
      if (next > capacity_) break;
      mapped_ = next;
    }
    peak = std::max(peak, mapped_.load());
    return mapped_;
  }
  int32_t trim_state_slots(int32_t slots) override {
    std::lock_guard<std::mutex> lock(mu_);
    args_ok &= slots < mapped_ && slots % chunk_ == 0;
    for (int32_t s = slots; s < mapped_; ++s) state_[size_t(s)] = -1, next_pos_[size_t(s)] = -2;  // gone: unmapped
    mapped_ = slots;
    ++trims;
    cv_.notify_all();
    return mapped_;
  }
  int64_t state_slot_resident_bytes() const override { return chunk_ > 0 ? int64_t(mapped_) * kSlotBytes : -1; }
  // What the test reads, under the lock the step thread resizes under.
  struct Counts {
    int grows, trims;
    int32_t mapped, peak;
    bool args_ok;
  };
  Counts counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return {grows, trims, mapped_, peak, args_ok};
  }
  void set_capacity(int32_t slots) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = slots;
  }
  bool wait_trimmed_to(int32_t slots, int seconds = 20) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return mapped_ == slots; });
  }

  void forward(const ForwardBatch &b) override {
    begin_step(b);  // (waits while `held`)
    if (!b.state_slots) throw std::logic_error("no state slots in the batch");
    std::set<int32_t> seen;
    for (int32_t q = 0; q < b.attn.n_seqs; ++q) {
      const int32_t slot = b.state_slots[q], pos0 = b.attn.seq_pos0[q];
      if (slot < 0 || slot >= mapped_ || !seen.insert(slot).second) {
        violations.push_back("slot " + std::to_string(slot) + " out of range (" + std::to_string(mapped_) +
                             " mapped) or twice in one step");
        continue;
      }
      int64_t &s = state_[size_t(slot)];
      if (pos0 == 0) {
        s = 0, ++fresh_starts;  // a sequence starting (again): the slot's old contents are not its
      } else if (next_pos_[size_t(slot)] != pos0) {
        violations.push_back("slot " + std::to_string(slot) + " continued at " + std::to_string(pos0) + ", its state is at " +
                             std::to_string(next_pos_[size_t(slot)]));
      }
      for (int32_t r = b.attn.seq_q_start[q]; r < b.attn.seq_q_start[q + 1]; ++r) {
        s = mix(s, input(b, r));
        next_[size_t(r)] = pick(s);
      }
      next_pos_[size_t(slot)] = pos0 + b.attn.seq_q_start[q + 1] - b.attn.seq_q_start[q];
    }
    max_distinct_slots = std::max(max_distinct_slots, int(seen.size()));
  }

 private:
  std::vector<int64_t> state_;
  std::vector<int32_t> next_pos_;  // per slot: the position its state has reached
  int grows = 0, trims = 0;
  int32_t peak = 0;
  bool args_ok = true;
  int32_t n_slots_, chunk_, capacity_;
  std::atomic<int32_t> mapped_;
  std::mutex mu_;
  std::condition_variable cv_;
};

constexpr int32_t kSeats = 4;

// An engine of `seats` seats and slots over a layout of an attention layer and a recurrent one; n_blocks KV blocks
// of 16 tokens (few: preemptions). chunk > 0: slots that grow (RecurrentDecoder's).
std::unique_ptr<Engine> make_engine(int32_t n_blocks, bool chaining, RecurrentDecoder **decoder, int32_t seats = kSeats,
                                    int32_t chunk = 0, int32_t capacity = 0) {
  ModelConfig c;
  c.architecture = "test", c.vocab_size = kVocab, c.max_position_embeddings = 1024;
  c.eos_token_ids = {kVocab - 1};
  MemoryPlan m;
  m.max_context = 256, m.block_size = 16, m.max_seqs = seats, m.max_batch_tokens = 64, m.n_blocks = n_blocks;
  m.state = StateLayout(2, 8);
  m.state.add_attention();
  m.state.add_slot(3);
  m.n_state_slots = seats;
  m.state_slot_bytes = seats * kSlotBytes;
  m.prefix_caching = false;  // (as plan_memory has it for a model with slots)
  m.kv_trim_delay_ms = 0;    // (the trims here are waited for, not timed)
  auto d = std::make_unique<RecurrentDecoder>(seats, chaining, chunk, capacity);
  *decoder = d.get();
  return Engine::with_decoder(std::move(d), c, m);
}

vt_request_params greedy(int32_t max_tokens) {
  vt_request_params p = vt_request_default_params();
  p.max_tokens = max_tokens;
  p.temperature = 0;
  p.n_stop_ids = 0;  // no stop id: every request runs to max_tokens
  return p;
}

std::vector<int32_t> prompt_of(int i) {
  std::vector<int32_t> p;
  for (int k = 0; k <= (i * 7) % 23; ++k) p.push_back((i * 13 + k * 5) % (kVocab - 1));
  return p;
}

// 16 requests through 4 seats and slots, with a KV pool too small for 4 at once (preemptions): every request's
// tokens are the recurrence's, and afterwards all 4 slots serve 4 requests at once (none leaked).
void through_few_slots(bool chaining) {
  RecurrentDecoder *d = nullptr;
  auto e = make_engine(10, chaining, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  std::vector<uint64_t> ids;
  std::vector<std::vector<int32_t>> prompts;
  d->held = true;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(prompt_of(i));
    ids.push_back(e->submit(prompts.back().data(), int32_t(prompts.back().size()), greedy(30 + i % 7)));
  }
  d->held = false;
  CHECK(ev.wait_finished(ids));
  const std::string mode = chaining ? "chained" : "unchained";
  for (size_t i = 0; i < ids.size(); ++i) {
    std::lock_guard<std::mutex> lock(ev.mu);
    record(ev.tokens[ids[i]] == expected(prompts[i], 30 + int32_t(i) % 7), mode + " request " + std::to_string(i) + ": the recurrence's tokens");
    record(ev.finishes[ids[i]].size() == 1, mode + " request " + std::to_string(i) + ": one finish");
  }
  const int64_t preempted = e->stats().preemptions;
  std::printf("%s: %lld preemptions, %d fresh starts, %d chained steps\n", mode.c_str(), (long long)preempted, d->fresh_starts,
              d->chained_steps);
  CHECK(preempted > 0);
  CHECK(d->fresh_starts == 16 + preempted);  // each request once, and again after each preemption
  if (chaining) CHECK(d->chained_steps > 0);

  // All four slots free again: four one-token prompts run side by side.
  d->max_distinct_slots = 0;
  std::vector<uint64_t> late;
  const std::vector<int32_t> one = {7};
  d->held = true;
  for (int i = 0; i < kSeats; ++i) late.push_back(e->submit(one.data(), 1, greedy(20)));
  d->held = false;
  CHECK(ev.wait_finished(late));
  CHECK(d->max_distinct_slots == kSeats);
  for (const std::string &v : d->violations) record(false, mode + ": " + v);
  CHECK(d->violations.empty());
}

// A paused request keeps its slot; when every slot is wanted its state is taken back and, allowed to go on, it
// starts again from position 0 and still gives the recurrence's tokens.
void paused_gives_back() {
  RecurrentDecoder *d = nullptr;
  auto e = make_engine(64, false, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  const std::vector<int32_t> held_prompt = {3, 1, 4, 1, 5};
  vt_request_params six = greedy(40);
  six.allowed_tokens = 6;  // from its submit: a later allow_tokens could come after the step thread ran past 6
  const uint64_t held = e->submit(held_prompt.data(), 5, six);
  for (int t = 0; t < 400 && e->stats().requests_paused != 1; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(e->stats().requests_paused == 1 && ev.count(held) == 6);
  const int starts_before = d->fresh_starts;
  // Four more: the seats are free (a paused request has none), the slots are not: one is the paused request's.
  std::vector<uint64_t> others;
  std::vector<std::vector<int32_t>> prompts;
  d->held = true;
  for (int i = 0; i < kSeats; ++i) {
    prompts.push_back(prompt_of(20 + i));
    others.push_back(e->submit(prompts.back().data(), int32_t(prompts.back().size()), greedy(25)));
  }
  d->held = false;
  CHECK(ev.wait_finished(others));
  CHECK(d->max_distinct_slots == kSeats);
  CHECK(e->stats().preemptions >= 1);  // the paused request's state taken back
  e->allow_tokens(held, -1);
  CHECK(ev.wait_finished({held}));
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    CHECK(ev.tokens[held] == expected(held_prompt, 40));
    for (int i = 0; i < kSeats; ++i) CHECK(ev.tokens[others[size_t(i)]] == expected(prompts[size_t(i)], 25));
  }
  CHECK(d->fresh_starts == starts_before + kSeats + 1);  // the four, and the paused one again
  for (const std::string &v : d->violations) record(false, "paused: " + v);
  CHECK(d->violations.empty());
}

// Slots that grow, on a device with memory for 4 of 8 (chunks of 2, the first mapped at load): 16 requests through 8
// seats wait for a slot as the device runs out, none lost, every one the recurrence's tokens, no slot used outside
// the mapped ones; the report follows the mapped slots, and once idle the engine trims them back to its base. With
// memory back, 8 run side by side.
void slots_grow(bool chaining) {
  const std::string mode = std::string("growing slots") + (chaining ? ", chained" : "");
  RecurrentDecoder *d = nullptr;
  auto e = make_engine(64, chaining, &d, 8, 2, 4);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  record(e->memory().state_slot_bytes == 2 * kSlotBytes, mode + ": the first chunk mapped at load, and reported");
  const vt_engine_stats at_load = e->stats();
  record(at_load.state_slots_total == 8 && at_load.state_slots_mapped == 2 && at_load.state_slots_held == 0,
         mode + ": stats() at load: 8 slots, 2 mapped, none held");
  std::vector<uint64_t> ids;
  std::vector<std::vector<int32_t>> prompts;
  d->held = true;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(prompt_of(40 + i));
    ids.push_back(e->submit(prompts.back().data(), int32_t(prompts.back().size()), greedy(20 + i % 5)));
  }
  d->held = false;
  record(ev.wait_finished(ids), mode + ": every request ends");
  for (size_t i = 0; i < ids.size(); ++i) {
    std::lock_guard<std::mutex> lock(ev.mu);
    record(ev.tokens[ids[i]] == expected(prompts[i], 20 + int32_t(i) % 5), mode + " request " + std::to_string(i) + ": its tokens");
    record(ev.finishes[ids[i]] == std::vector<int32_t>{VT_FINISH_LENGTH}, mode + " request " + std::to_string(i) + ": one finish");
  }
  record(d->wait_trimmed_to(2), mode + ": trimmed back to the base once idle");
  RecurrentDecoder::Counts n = d->counts();
  record(n.peak == 4 && n.grows >= 2 && n.trims >= 1 && n.args_ok, mode + ": grew to what the device had, then trimmed");
  record(d->max_distinct_slots == 4, mode + ": 4 at once, the slots the device had");
  for (int t = 0; t < 400 && e->memory().state_slot_bytes != 2 * kSlotBytes; ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  record(e->memory().state_slot_bytes == 2 * kSlotBytes, mode + ": the report after the trim");
  const vt_engine_stats idle = e->stats();  // (the same step-thread pass that trims sets them: polled above)
  record(idle.state_slots_total == 8 && idle.state_slots_mapped == 2 && idle.state_slots_held == 0,
         mode + ": stats() after the trim: 2 mapped, none held");

  // Memory back: the trim lifted the limit, so the slots grow to all 8 for 8 requests at once.
  d->set_capacity(8);
  d->max_distinct_slots = 0;
  std::vector<uint64_t> late;
  const std::vector<int32_t> one = {9};
  d->held = true;
  for (int i = 0; i < 8; ++i) late.push_back(e->submit(one.data(), 1, greedy(15)));
  d->held = false;
  record(ev.wait_finished(late), mode + ": the second round ends");
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    for (uint64_t id : late) record(ev.tokens[id] == expected(one, 15), mode + ": second round's tokens");
  }
  record(d->max_distinct_slots == 8 && d->counts().peak == 8, mode + ": grew past the old limit after the trim");
  record(d->wait_trimmed_to(2), mode + ": trimmed again");
  for (const std::string &v : d->violations) record(false, mode + ": " + v);
  CHECK(d->violations.empty());
}

// A layout of attention, recurrent and stateless layers: each kind numbered apart, the slots' parts side by side,
// K/V bytes of the attention layers only; the CPU cache's planes and slot parts where the layout puts them.
void layout_and_cache() {
  StateLayout s(2, 8);
  s.add_attention();
  s.add_slot(5);
  s.add_stateless();
  s.add_attention();
  s.add_slot(7);
  CHECK(s.n_layers() == 5 && s.n_paged() == 2 && s.slot_elems() == 12 && s.has_slots());
  CHECK(s.layer(0).kind == LayerState::kPagedKV && s.layer(0).index == 0);
  CHECK(s.layer(3).kind == LayerState::kPagedKV && s.layer(3).index == 1);
  CHECK(s.layer(1).kind == LayerState::kSlot && s.layer(1).index == 0 && s.layer(1).slot_offset == 0);
  CHECK(s.layer(4).kind == LayerState::kSlot && s.layer(4).index == 1 && s.layer(4).slot_offset == 5);
  CHECK(s.layer(2).kind == LayerState::kNone);
  CHECK(s.kv_bytes_per_token(4) == 2 * 2 * 2 * 8 * 4);
  ModelConfig c;
  c.n_layers = 3, c.n_kv_heads = 2, c.head_dim = 8;
  const StateLayout dense = StateLayout::all_attention(c);
  CHECK(dense.n_paged() == 3 && !dense.has_slots() && dense.kv_bytes_per_token(2) == 3 * 2 * 2 * 8 * 2);

  KvCache kv(s, 4, 16, 3);  // 4 blocks of 16 tokens, 3 slots
  const int64_t plane = 4 * 16 * 2 * 8;
  CHECK(kv.bytes() == (2 * 2 * plane + 3 * 12) * int64_t(sizeof(float)));
  CHECK(kv.k(0) + plane == kv.v(0) && kv.v(0) + plane == kv.k(3) && kv.k(3) + plane == kv.v(3));
  CHECK(kv.state(1, 0) == kv.v(3) + plane && kv.state(4, 0) == kv.state(1, 0) + 5 && kv.state(1, 2) == kv.state(1, 0) + 24);
  bool threw = false;
  try {
    kv.k(1);  // a recurrent layer has no K/V
  } catch (const std::logic_error &) {
    threw = true;
  }
  CHECK(threw);
  threw = false;
  try {
    kv.state(4, 3);  // slot 3 of 3
  } catch (const std::logic_error &) {
    threw = true;
  }
  CHECK(threw);
  kv.state(4, 2)[6] = 1.f;  // the last value of the mapping is writable
  CHECK(kv.resident_bytes() > 0);
}

}  // namespace

int main() {
  layout_and_cache();
  through_few_slots(false);
  through_few_slots(true);
  paused_gives_back();
  slots_grow(false);
  slots_grow(true);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
