// The KV pool that grows, through the whole engine (Engine::step, step_overlapped, trim_pool), without a model:
// an engine over a fake decoder whose paged pool maps chunks as the engine asks (Decoder::grow_kv, up to what its
// "device" has memory for: a mapping may come short part-way), zeroes what it maps, poisons what it unmaps
// (trim_kv), and records any row that reads or writes a block outside the mapped chunks. Its forward stores each row's
// "K/V" at the slot the engine gives it and makes each row's next token a hash of every K/V its block table reaches,
// so a row that reads an unmapped, trimmed or overwritten block picks another token. Every request must get exactly
// the tokens a plain recomputation gives: while the pool grows, when the device runs out part-way (requests are
// preempted and recomputed, none is lost), with decode steps chained, with aborts in flight, and across idle trims
// that give the chunks above the base back (cached blocks there evicted, those in the base still found).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "engine.h"
#include "fake_engine.h"
#include "memory_plan.h"
#include "models/decoder.h"

using namespace vt;
using fake_engine::Events;
using fake_engine::FakeDecoder;
using fake_engine::cat;
using fake_engine::greedy;
using fake_engine::key;

namespace {

constexpr int32_t kVocab = 61;
constexpr uint64_t kPoison = 0x5ca1ab1e5ca1ab1eull;  // an unmapped slot, as a stale read would see it

int32_t next_of(const uint64_t *kv, int32_t n) { return fake_engine::next_of(kv, n, kVocab); }

class GrowingDecoder : public FakeDecoder {
 public:
  GrowingDecoder(int32_t ceiling, int32_t block_size, int32_t chunk, int32_t base, int32_t capacity, bool chaining)
      : FakeDecoder(kVocab, chaining, 16), ceiling_(ceiling), bs_(block_size), chunk_(chunk), capacity_(capacity),
        kv_(size_t(ceiling) * size_t(block_size), kPoison) {
    map_to(std::min(ceiling, (base + chunk - 1) / chunk * chunk));
  }

  int32_t kv_chunk_blocks() const override { return chunk_; }
  int32_t kv_mapped_blocks() const override { return mapped_; }
  int32_t grow_kv(int32_t blocks) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++grows_;
    args_ok_ &= blocks > mapped_ && blocks <= ceiling_ && (blocks % chunk_ == 0 || blocks == ceiling_);
    map_to(blocks);
    peak_ = std::max(peak_, mapped_);
    return mapped_;
  }
  int32_t trim_kv(int32_t blocks) override {
    std::lock_guard<std::mutex> lock(mu_);
    args_ok_ &= blocks < mapped_ && blocks % chunk_ == 0;
    const int32_t keep = (blocks + chunk_ - 1) / chunk_ * chunk_;
    std::fill(kv_.begin() + int64_t(keep) * bs_, kv_.begin() + int64_t(mapped_) * bs_, kPoison);
    mapped_ = keep;
    ++trims_;
    cv_.notify_all();
    return mapped_;
  }
  int64_t kv_resident_bytes() const override { return int64_t(mapped_) * 1000; }

  void forward(const ForwardBatch &b) override {
    const cpu::AttentionBatch &a = b.attn;
    begin_step(b);  // (waits while `held`: round_of submits a round whole, so the pool must grow)
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t r = 0; r < b.n_tokens; ++r) {  // the K/V store first: a row attends to its own chunk too
      if (b.slots[r] / bs_ >= mapped_) ++outside_;
      else kv_.at(size_t(b.slots[r])) = key(input(b, r), b.positions[r]);
    }
    std::vector<uint64_t> seen;
    for (int32_t s = 0; s < a.n_seqs; ++s) {
      const int32_t *table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
      for (int32_t r = a.seq_q_start[s]; r < a.seq_q_start[s + 1]; ++r) {
        const int32_t pos = b.positions[r];
        seen.clear();
        for (int32_t q = 0; q <= pos; ++q) {
          const int32_t block = table[q / bs_];
          if (block >= mapped_) ++outside_;  // a read past the mapping: on a GPU, a fault
          seen.push_back(kv_.at(size_t(block) * bs_ + q % bs_));
        }
        next_[size_t(r)] = next_of(seen.data(), int32_t(seen.size()));
      }
    }
  }

  // What the test reads, under the lock the step thread writes them under.
  struct Counts {
    int32_t mapped, peak;
    int grows, trims;
    int64_t outside;
    bool args_ok;
  };
  Counts counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return {mapped_, peak_, grows_, trims_, outside_, args_ok_};
  }
  void set_capacity(int32_t blocks) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = blocks;
  }
  // Waits until the engine has trimmed the pool to `blocks` (it does so once it is idle, on its step thread).
  bool wait_trimmed_to(int32_t blocks, int seconds = 20) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return mapped_ == blocks; });
  }

 private:
  void map_to(int32_t blocks) {  // chunk by chunk, zeroed, until the device's memory ends
    while (mapped_ < blocks) {
      const int32_t next = std::min(ceiling_, (mapped_ / chunk_ + 1) * chunk_);
      if (next > capacity_) {
        ++shortfalls_;
        break;
      }
      std::fill(kv_.begin() + int64_t(mapped_) * bs_, kv_.begin() + int64_t(next) * bs_, 0);
      mapped_ = next;
    }
  }

  int32_t ceiling_, bs_, chunk_, capacity_;
  std::vector<uint64_t> kv_;
  std::mutex mu_;
  std::condition_variable cv_;
  int32_t mapped_ = 0, peak_ = 0;
  int grows_ = 0, trims_ = 0, shortfalls_ = 0;
  int64_t outside_ = 0;
  bool args_ok_ = true;
};

// What a request must get: each next token from every K/V before it, recomputed from nothing.
std::vector<int32_t> expected(const std::vector<int32_t> &prompt, int32_t max_tokens) {
  return fake_engine::expected(prompt, max_tokens, kVocab);
}

struct Setup {
  bool caching, chaining;
  int32_t ceiling, base, chunk, capacity;
  int32_t block_size = 8, max_context = 256, max_batch_tokens = 64;
  int32_t trim_delay_ms = 0;  // (the product waits a second; the trims here are waited for, not timed)
};

std::unique_ptr<Engine> make_engine(const Setup &s, GrowingDecoder **decoder) {
  ModelConfig c;
  c.architecture = "test", c.vocab_size = kVocab, c.max_position_embeddings = 4096;
  c.eos_token_ids = {kVocab - 1};
  MemoryPlan m;
  m.max_context = s.max_context, m.block_size = s.block_size, m.max_seqs = 8, m.max_batch_tokens = s.max_batch_tokens;
  m.n_blocks = s.ceiling, m.prefix_caching = s.caching, m.kv_trim_delay_ms = s.trim_delay_ms;
  auto d = std::make_unique<GrowingDecoder>(s.ceiling, s.block_size, s.chunk, s.base, s.capacity, s.chaining);
  *decoder = d.get();
  return Engine::with_decoder(std::move(d), c, m);
}

std::vector<int32_t> span(int32_t seed, int32_t n) { return fake_engine::span(seed, n, kVocab); }

// Submits every prompt at once (the decoder's steps held until all are in) and checks each request's tokens against
// the recomputation.
void round_of(Engine &e, GrowingDecoder &d, Events &ev, const std::vector<std::vector<int32_t>> &prompts,
              int32_t max_tokens, const std::string &what, std::vector<std::vector<int32_t>> *outputs = nullptr) {
  std::vector<uint64_t> ids;
  d.held = true;
  for (const auto &p : prompts) ids.push_back(e.submit(p.data(), int32_t(p.size()), greedy(max_tokens)));
  d.held = false;
  record(ev.wait_finished(ids), what + ": every request ends");
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::lock_guard<std::mutex> lock(ev.mu);
    record(ev.tokens[ids[i]] == expected(prompts[i], max_tokens), what + ", request " + std::to_string(i) + ": its tokens");
    record(ev.finishes[ids[i]] == std::vector<int32_t>{VT_FINISH_LENGTH}, what + ": one finish");
    if (outputs) outputs->push_back(ev.tokens[ids[i]]);
  }
}

// The pool grows past its base as requests need blocks, every token is right, and once the engine is idle it is
// trimmed back to the base on the step thread; the report follows both ways.
void grows_and_trims(bool caching, bool chaining) {
  const std::string mode = std::string(caching ? "cache" : "no cache") + (chaining ? ", chained" : "");
  GrowingDecoder *d = nullptr;
  Setup setup{caching, chaining, 256, 32, 16, 256};
  setup.trim_delay_ms = caching && chaining ? 50 : 0;  // one mode through the delayed trim
  auto e = make_engine(setup, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  const vt_memory_report before = e->memory();
  record(before.kv_blocks_total == 256 && before.kv_blocks_mapped == 32 && before.kv_cache_resident_bytes == 32000,
         mode + ": the base mapped at load");
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 8; ++i) prompts.push_back(cat(span(1, 41), span(100 + i, 20 + 9 * i)));
  std::vector<std::vector<int32_t>> outputs;
  round_of(*e, *d, ev, prompts, 30, mode + ": first round", &outputs);
  record(d->wait_trimmed_to(32), mode + ": trimmed back to the base once idle");
  const GrowingDecoder::Counts n = d->counts();
  record(n.peak > 32 && n.grows > 0 && n.trims >= 1 && n.outside == 0 && n.args_ok,
         mode + ": grew, trimmed, stayed inside (peak " + std::to_string(n.peak) + ", grows " + std::to_string(n.grows) +
             ", trims " + std::to_string(n.trims) + ", outside " + std::to_string(n.outside) + ", args " +
             (n.args_ok ? "ok" : "bad") + ")");
  const vt_engine_stats st = e->stats();
  record(st.kv_blocks_used == 0 && st.kv_blocks_total == 256, mode + ": nothing held, the ceiling reported");
  // (the stats' mapped figures are set by the same step-thread pass that trims: poll for them, not for time)
  for (int t = 0; t < 400 && e->memory().kv_blocks_mapped != 32; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const vt_memory_report after = e->memory();
  record(after.kv_blocks_mapped == 32 && after.kv_cache_resident_bytes == 32000, mode + ": the report after the trim");
  // Next turns: the prompts again with their replies; what was cached above the base was evicted by the trim (and
  // the poison the trim left there would show in the tokens), what is in the base may be found.
  for (size_t i = 0; i < prompts.size(); ++i) prompts[i] = cat(cat(prompts[i], outputs[i]), span(300 + int32_t(i), 5));
  round_of(*e, *d, ev, prompts, 12, mode + ": second round");
  record(d->wait_trimmed_to(32), mode + ": trimmed again");
  record(d->counts().outside == 0, mode + ": stayed inside the mapped chunks");
  if (caching) record(e->stats().prefix_cache_hit_tokens > 0, mode + ": the cache served some tokens");
}

// The device runs out part-way: the mapped count becomes the ceiling, requests are preempted and recomputed, and
// every one finishes with its tokens. After the idle trim, with memory back, the pool grows further again.
void device_runs_out(bool chaining) {
  const std::string mode = std::string("device runs out") + (chaining ? ", chained" : "");
  GrowingDecoder *d = nullptr;
  auto e = make_engine({true, chaining, 256, 32, 16, 64}, &d);  // memory for 64 blocks, a ceiling of 256
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 8; ++i) prompts.push_back(span(200 + i, 60 + 11 * i));
  round_of(*e, *d, ev, prompts, 40, mode);
  const vt_engine_stats st = e->stats();
  GrowingDecoder::Counts n = d->counts();
  record(st.preemptions > 0 && n.peak == 64 && n.outside == 0 && n.args_ok, mode + ": preempted within 64 blocks");
  record(d->wait_trimmed_to(32), mode + ": trimmed once idle");
  d->set_capacity(256);
  round_of(*e, *d, ev, prompts, 40, mode + ", then memory back");
  n = d->counts();
  record(n.peak > 64 && n.outside == 0, mode + ": grew past the old limit after the trim");
}

// Aborts while chained steps run and the pool grows: the others get their tokens, the victims' blocks come back,
// and the idle trim follows.
void aborts_while_growing() {
  GrowingDecoder *d = nullptr;
  auto e = make_engine({true, true, 256, 16, 16, 256}, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<uint64_t> ids;
  for (int32_t i = 0; i < 6; ++i) prompts.push_back(cat(span(3, 29), span(50 + i, 30 + 7 * i)));
  std::vector<bool> victim(6, false);
  ev.on_token = [&](uint64_t id, size_t n) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == id && victim[i] && n == 5) e->abort(id);
  };
  {
    std::lock_guard<std::mutex> lock(ev.mu);  // (on_token reads ids on the step thread)
    for (int32_t i = 0; i < 6; ++i) {
      victim[size_t(i)] = i % 2 == 0;
      ids.push_back(e->submit(prompts[size_t(i)].data(), int32_t(prompts[size_t(i)].size()), greedy(victim[size_t(i)] ? 1000 : 60)));
    }
  }
  CHECK(ev.wait_finished(ids));
  for (size_t i = 0; i < ids.size(); ++i) {
    std::lock_guard<std::mutex> lock(ev.mu);
    const std::vector<int32_t> &got = ev.tokens[ids[i]];
    const std::vector<int32_t> want = expected(prompts[i], victim[i] ? 1000 : 60);
    CHECK(got.size() <= want.size() && std::equal(got.begin(), got.end(), want.begin()));
    CHECK(ev.finishes[ids[i]] == std::vector<int32_t>{victim[i] ? VT_FINISH_ABORT : VT_FINISH_LENGTH});
  }
  CHECK(d->wait_trimmed_to(16));
  const GrowingDecoder::Counts n = d->counts();
  CHECK(n.peak > 16 && n.outside == 0 && n.args_ok && d->chained_steps > 5);
  CHECK(e->stats().kv_blocks_used == 0);
}

}  // namespace

int main() {
  for (bool chaining : {false, true})
    for (bool caching : {false, true}) grows_and_trims(caching, chaining);
  device_runs_out(false);
  device_runs_out(true);
  aborts_while_growing();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
