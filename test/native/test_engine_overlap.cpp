// The overlapped greedy decode's bookkeeping (Engine::step_overlapped, cuda/src/engine.cpp) without a GPU: an engine
// over a fake decoder (Engine::with_decoder) whose "model" is a fixed rule, next = rule(token, position), and which
// chains decode steps as the CUDA decoder does (Decoder::chains: a step launched with its tokens the picks of the step
// before, the picks read a step later), or not. On the GPU a stop token or a length is found while the step after it
// already runs; here each step runs at once, so nothing overlaps and the engine's side is what is tested: which steps
// chain, requests ending inside a chain, aborts while a step is in flight, backpressure allowances. Every request's
// tokens and finish must be the rule's, chained or not, each request must end exactly once, and the engine must end
// holding no KV block.
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
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

namespace {

constexpr int32_t kVocab = 64;

int32_t rule(int32_t token, int32_t pos) { return (token * 31 + pos * 7 + 3) % kVocab; }

// Greedy over one-hot logits at rule(token, position) of each row; chains when asked (picks FIFO, at most two begun).
class RuleDecoder : public FakeDecoder {
 public:
  explicit RuleDecoder(bool chaining) : FakeDecoder(kVocab, chaining, 8) {}

  void forward(const ForwardBatch &b) override {
    begin_step(b);
    for (int32_t r = 0; r < b.n_tokens; ++r) next_[size_t(r)] = rule(input(b, r), b.positions[r]);
  }
};

// What a request gets from the rule: tokens until max_tokens or a stop id (included, as the engine reports it).
std::vector<int32_t> expected(const std::vector<int32_t> &prompt, int32_t max_tokens, const std::vector<int32_t> &stops,
                              bool *stopped) {
  std::vector<int32_t> out;
  int32_t tok = prompt.back(), pos = int32_t(prompt.size()) - 1;
  *stopped = false;
  while (int32_t(out.size()) < max_tokens) {
    tok = rule(tok, pos++);
    out.push_back(tok);
    if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
      *stopped = true;
      break;
    }
  }
  return out;
}

std::unique_ptr<Engine> make_engine(bool chaining, RuleDecoder **decoder) {
  ModelConfig c;
  c.architecture = "test", c.vocab_size = kVocab, c.max_position_embeddings = 1024;
  c.eos_token_ids = {kVocab - 1};
  MemoryPlan m;
  m.max_context = 1024, m.block_size = 16, m.max_seqs = 8, m.max_batch_tokens = 64, m.n_blocks = 256;
  auto d = std::make_unique<RuleDecoder>(chaining);
  *decoder = d.get();
  return Engine::with_decoder(std::move(d), c, m);
}

vt_request_params greedy(int32_t max_tokens, std::vector<int32_t> stops) {
  vt_request_params p = vt_request_default_params();
  p.max_tokens = max_tokens;
  p.temperature = 0;  // plain greedy: the steps that chain
  p.n_stop_ids = int32_t(stops.size());
  for (size_t i = 0; i < stops.size(); ++i) p.stop_ids[i] = stops[i];
  return p;
}

struct Req {
  std::vector<int32_t> prompt;
  int32_t max_tokens;
  std::vector<int32_t> stops;
};

// The requests of every scenario: prompts of 1 to 20 tokens, lengths 1 to 40, some with a stop id their rule reaches
// part way (so they end inside a chain), some with one it never reaches.
std::vector<Req> requests() {
  std::vector<Req> rs;
  for (int i = 0; i < 12; ++i) {
    Req r;
    for (int k = 0; k <= (i * 7) % 20; ++k) r.prompt.push_back((i * 13 + k * 5) % (kVocab - 1));
    r.max_tokens = 1 + (i * 11) % 40;
    bool stopped = false;
    const std::vector<int32_t> free_run = expected(r.prompt, 40, {}, &stopped);
    if (i % 3 == 1) r.stops = {free_run[size_t(std::min<int>(3 + i, int(free_run.size()) - 1))]};
    rs.push_back(r);
  }
  return rs;
}

void run_all(bool chaining) {
  RuleDecoder *d = nullptr;
  auto e = make_engine(chaining, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  const std::vector<Req> rs = requests();
  std::vector<uint64_t> ids;
  for (const Req &r : rs) ids.push_back(e->submit(r.prompt.data(), int32_t(r.prompt.size()), greedy(r.max_tokens, r.stops)));
  CHECK(ev.wait_finished(ids));
  const std::string mode = chaining ? "chained" : "unchained";
  int stopped_n = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    bool stopped = false;
    const std::vector<int32_t> want = expected(rs[i].prompt, rs[i].max_tokens, rs[i].stops, &stopped);
    stopped_n += stopped;
    std::lock_guard<std::mutex> lock(ev.mu);
    record(ev.tokens[ids[i]] == want, mode + " request " + std::to_string(i) + ": the rule's tokens");
    record(ev.finishes[ids[i]].size() == 1 &&
               ev.finishes[ids[i]][0] == (stopped ? VT_FINISH_EOS : VT_FINISH_LENGTH),
           mode + " request " + std::to_string(i) + ": one finish, the right one");
  }
  CHECK(stopped_n >= 3);
  // (a sequence that ended while the step after it ran is removed once that step is collected: wait for it)
  for (int t = 0; t < 200 && e->stats().requests_running > 0; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(e->stats().requests_running == 0 && e->stats().kv_blocks_used == 0);
  if (chaining) {
    std::printf("chained: %d steps launched on the picks of the one before, at most %d reads begun\n", d->chained_steps,
                d->begun_max);
    CHECK(d->chained_steps > 5 && d->begun_max == 2);
  } else {
    CHECK(d->chained_steps == 0);
  }
}

// An abort while a chained step is in flight ends that request once, with the rule's tokens up to where it stopped,
// and the others go on; a request allowed n tokens stops at n exactly (the chain stops before a step its reader has
// not allowed) and, allowed more, continues with the rule's tokens.
void abort_and_allowance() {
  RuleDecoder *d = nullptr;
  auto e = make_engine(true, &d);
  Events ev;
  e->set_step_callback(&Events::on_step, &ev);
  const std::vector<int32_t> prompt = {5, 9, 2};
  bool stopped = false;
  const std::vector<int32_t> want = expected(prompt, 300, {}, &stopped);
  // The abort arrives after the 5th read of picks, from the step thread itself: the step after it is in flight.
  // (Set before the first submit: the step thread runs from then on, and reads the hook.)
  uint64_t victim = 0;
  d->after_read = [&](int read) {
    if (read == 5) e->abort(victim);
  };
  victim = e->submit(prompt.data(), 3, greedy(1000, {}));
  const uint64_t bystander = e->submit(prompt.data(), 3, greedy(300, {}));
  vt_request_params seventeen = greedy(300, {});
  seventeen.allowed_tokens = 17;  // from its submit: a later allow_tokens could come after the chain ran past 17
  const uint64_t held = e->submit(prompt.data(), 3, seventeen);
  CHECK(ev.wait_finished({victim, bystander}));
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    const auto &v = ev.tokens[victim];
    CHECK(v.size() >= 6 && v.size() < 20 && std::equal(v.begin(), v.end(), want.begin()));
    CHECK(ev.finishes[victim] == std::vector<int32_t>{VT_FINISH_ABORT});
    CHECK(ev.tokens[bystander] == want);
  }
  // the held request: exactly 17 tokens while paused (the engine idles; no step makes an 18th)
  for (int t = 0; t < 200 && e->stats().requests_paused != 1; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(e->stats().requests_paused == 1);
  CHECK(ev.count(held) == 17);
  e->allow_tokens(held, 120);
  for (int t = 0; t < 400 && ev.count(held) < 120; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(ev.count(held) == 120);
  e->allow_tokens(held, -1);
  CHECK(ev.wait_finished({held}));
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    CHECK(ev.tokens[held] == want);
    CHECK(ev.finishes[held] == std::vector<int32_t>{VT_FINISH_LENGTH});
  }
  for (int t = 0; t < 200 && e->stats().requests_running > 0; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(e->stats().kv_blocks_used == 0);
}

}  // namespace

int main() {
  run_all(false);
  run_all(true);
  abort_and_allowance();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
