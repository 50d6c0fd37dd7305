// Prefix caching through the whole engine (Engine::step, step_overlapped, accept, abort), without a model: an engine
// over a fake decoder (Engine::with_decoder) whose KV pool is real, in the engine's paged layout. Its forward stores
// each row's "K/V", key(token, position), at the slot the engine gives it, then makes each row's next token a hash of
// every K/V its sequence's block table reaches at positions 0 .. its own, so a row that reads a wrong block, a block
// overwritten by another sequence, or a position never computed picks another token. Every request must get exactly
// the tokens a plain recomputation gives, with the cache on and off, with decode steps chained as the CUDA decoder
// chains them (the picks read a step later, the next step launched on them) or not, under a KV pool small enough to
// evict cached blocks and preempt requests, and with aborts while a chained step is in flight.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "engine.h"
#include "memory_plan.h"
#include "fake_engine.h"
#include "models/decoder.h"

using namespace vt;
using fake_engine::Events;
using fake_engine::FakeDecoder;
using fake_engine::cat;
using fake_engine::greedy;
using fake_engine::key;

namespace {

constexpr int32_t kVocab = 61;

int32_t next_of(const uint64_t *kv, int32_t n) { return fake_engine::next_of(kv, n, kVocab); }

class KvDecoder : public FakeDecoder {
 public:
  KvDecoder(int32_t n_blocks, int32_t block_size, bool chaining)
      : FakeDecoder(kVocab, chaining, 16), kv_(size_t(n_blocks) * size_t(block_size), 0), bs_(block_size) {}

  void forward(const ForwardBatch &b) override {
    const cpu::AttentionBatch &a = b.attn;
    begin_step(b);
    for (int32_t r = 0; r < b.n_tokens; ++r)  // the K/V store first: a row attends to its own chunk too
      kv_.at(size_t(b.slots[r])) = key(input(b, r), b.positions[r]);
    std::vector<uint64_t> seen;
    for (int32_t s = 0; s < a.n_seqs; ++s) {
      const int32_t *table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
      for (int32_t r = a.seq_q_start[s]; r < a.seq_q_start[s + 1]; ++r) {
        const int32_t pos = b.positions[r];
        seen.clear();
        for (int32_t q = 0; q <= pos; ++q) seen.push_back(kv_.at(size_t(table[q / bs_]) * bs_ + q % bs_));
        next_[size_t(r)] = next_of(seen.data(), int32_t(seen.size()));
      }
    }
  }

 private:
  std::vector<uint64_t> kv_;
  int32_t bs_;
};

// What a request must get: each next token from every K/V before it, recomputed from nothing.
std::vector<int32_t> expected(const std::vector<int32_t> &prompt, int32_t max_tokens) {
  return fake_engine::expected(prompt, max_tokens, kVocab);
}

struct Setup {
  bool caching, chaining;
  int32_t n_blocks, block_size, max_context, max_batch_tokens;
};

std::unique_ptr<Engine> make_engine(const Setup &s, KvDecoder **decoder) {
  ModelConfig c;
  c.architecture = "test", c.vocab_size = kVocab, c.max_position_embeddings = 4096;
  c.eos_token_ids = {kVocab - 1};
  MemoryPlan m;
  m.max_context = s.max_context, m.block_size = s.block_size, m.max_seqs = 8, m.max_batch_tokens = s.max_batch_tokens;
  m.n_blocks = s.n_blocks, m.prefix_caching = s.caching;
  auto d = std::make_unique<KvDecoder>(s.n_blocks, s.block_size, s.chaining);
  *decoder = d.get();
  return Engine::with_decoder(std::move(d), c, m);
}

std::vector<int32_t> span(int32_t seed, int32_t n) { return fake_engine::span(seed, n, kVocab); }

void wait_idle(Engine &e) {
  for (int t = 0; t < 400 && (e.stats().requests_running > 0 || e.stats().requests_waiting > 0); ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Waves of requests: a shared system prompt with different questions, all at once; then each one's next turn (its
// prompt, its reply and more), all at once. Returns the engine's stats at the end.
vt_engine_stats waves(const Setup &setup, int32_t n_requests, int32_t max_tokens) {
  KvDecoder *d = nullptr;
  auto e = make_engine(setup, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  const std::vector<int32_t> system = span(1, 37);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < n_requests; ++i) prompts.push_back(cat(system, span(100 + i, 3 + 5 * i % 17)));
  const std::string mode = std::string(setup.caching ? "cache" : "no cache") + (setup.chaining ? ", chained" : "") +
                           ", " + std::to_string(setup.n_blocks) + " blocks";
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<uint64_t> ids;
    for (const auto &p : prompts) ids.push_back(e->submit(p.data(), int32_t(p.size()), greedy(max_tokens)));
    record(ev.wait_finished(ids), mode + ": turn " + std::to_string(turn) + " ends");
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::lock_guard<std::mutex> lock(ev.mu);
      const std::vector<int32_t> &got = ev.tokens[ids[i]];
      record(got == expected(prompts[i], max_tokens), mode + ": turn " + std::to_string(turn) + ", request " +
                                                         std::to_string(i) + ": the recomputed tokens");
      record(ev.finishes[ids[i]] == std::vector<int32_t>{VT_FINISH_LENGTH}, mode + ": one finish");
      prompts[i] = cat(cat(prompts[i], got), span(200 + int32_t(i) + 10 * turn, 5));
    }
  }
  wait_idle(*e);
  const vt_engine_stats st = e->stats();
  record(st.kv_blocks_used == 0 && st.requests_running == 0, mode + ": nothing held at the end");
  record(setup.caching || (st.prefix_cache_queries == 0 && st.prefix_cache_blocks == 0), mode + ": no cache, no counts");
  record(!setup.chaining || d->chained_steps > 5, mode + ": decode steps chained");
  return st;
}

void all_modes() {
  for (bool chaining : {false, true}) {
    for (bool caching : {false, true}) {
      const vt_engine_stats roomy = waves({caching, chaining, 256, 16, 512, 64}, 6, 12);
      if (caching) CHECK(roomy.prefix_cache_hit_tokens > 6 * 32 && roomy.prefix_cache_evictions == 0);
      // 40 blocks of 8 = 320 tokens for 6 requests of up to ~180: preemption, and cached blocks evicted.
      const vt_engine_stats tight = waves({caching, chaining, 40, 8, 256, 48}, 6, 24);
      CHECK(tight.preemptions > 0);
      if (caching) CHECK(tight.prefix_cache_evictions > 0 && tight.prefix_cache_hit_tokens > 0);
      if (caching && chaining)
        std::printf("tight pool, cached and chained: %lld preemptions, %lld tokens found cached, %lld blocks evicted\n",
                    (long long)tight.preemptions, (long long)tight.prefix_cache_hit_tokens,
                    (long long)tight.prefix_cache_evictions);
    }
  }
}

// Aborts while chained steps run (from the step thread, as each victim's 4th token arrives), among requests sharing
// their prefix: the others get their tokens, the victims' cached blocks serve the requests after them.
void aborts_in_flight() {
  KvDecoder *d = nullptr;
  auto e = make_engine({true, true, 64, 8, 256, 64}, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  const std::vector<int32_t> system = span(3, 29);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) prompts.push_back(cat(system, span(50 + i, 4 + i)));
  std::vector<bool> victim(6, false);
  ev.on_token = [&](uint64_t id, size_t n) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == id && victim[i] && n == 4) e->abort(id);
  };
  {
    std::lock_guard<std::mutex> lock(ev.mu);  // (on_token reads ids on the step thread)
    for (int i = 0; i < 6; ++i) {
      victim[size_t(i)] = i % 2 == 1;
      ids.push_back(e->submit(prompts[size_t(i)].data(), int32_t(prompts[size_t(i)].size()), greedy(victim[size_t(i)] ? 1000 : 40)));
    }
  }
  CHECK(ev.wait_finished(ids));
  for (size_t i = 0; i < ids.size(); ++i) {
    std::lock_guard<std::mutex> lock(ev.mu);
    const std::vector<int32_t> &got = ev.tokens[ids[i]];
    const std::vector<int32_t> want = expected(prompts[i], victim[i] ? 1000 : 40);
    CHECK(got.size() <= want.size() && std::equal(got.begin(), got.end(), want.begin()));
    CHECK(ev.finishes[ids[i]] == std::vector<int32_t>{victim[i] ? VT_FINISH_ABORT : VT_FINISH_LENGTH});
    if (victim[i]) CHECK(got.size() >= 4 && got.size() < 20);
  }
  wait_idle(*e);
  CHECK(e->stats().kv_blocks_used == 0 && e->stats().prefix_cache_blocks > 0);
  // A victim's next turn finds its prompt cached.
  const int64_t hits = e->stats().prefix_cache_hit_tokens;
  const std::vector<int32_t> again = cat(prompts[1], span(7, 3));
  const uint64_t id = e->submit(again.data(), int32_t(again.size()), greedy(10));
  CHECK(ev.wait_finished({id}));
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    CHECK(ev.tokens[id] == expected(again, 10));
  }
  CHECK(e->stats().prefix_cache_hit_tokens - hits == int64_t(prompts[1].size()) / 8 * 8);
  CHECK(d->chained_steps > 5);
}

}  // namespace

int main() {
  all_modes();
  aborts_in_flight();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
