// What the engine tests over a fake decoder share (Engine::with_decoder: test_engine_overlap, test_engine_prefix_cache,
// test_engine_state_slots): a Decoder base whose "model" a test writes as a rule per row, with one-hot logits at each
// row's pick and the overlapped decode's reads as the CUDA decoder does them (Decoder::chains: a step launched with
// its tokens the picks of the step before, the picks read a step later, first in first out, at most two begun); and a
// collector of the engine's step events; the K/V-hash model of the paged tests and their request helpers.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "models/decoder.h"
#include "vt_engine.h"

namespace fake_engine {

class FakeDecoder : public vt::Decoder {
 public:
  // chains steps of 1 .. max_chain_rows rows when chaining; vocab: the logits' width.
  FakeDecoder(int32_t vocab, bool chaining, int32_t max_chain_rows)
      : vocab_(vocab), chaining_(chaining), max_chain_rows_(max_chain_rows) {}
  int chained_steps = 0, begun_max = 0, reads_ended = 0;
  // While set, steps wait (in begin_step): requests submitted one after another all meet in one batch however slowly
  // the submitting thread runs (on a loaded machine early ones could otherwise finish before the last was submitted).
  std::atomic<bool> held{false};
  std::function<void(int)> after_read;  // called on the step thread after each chain_end (the read's number)

  void project(const int32_t *rows, int32_t n, float *logits) override {
    for (int32_t i = 0; i < n; ++i)
      for (int32_t v = 0; v < vocab_; ++v) logits[int64_t(i) * vocab_ + v] = v == next_.at(size_t(rows[i])) ? 10.f : 0.f;
  }
  bool chains(int32_t n) const override { return chaining_ && n >= 1 && n <= max_chain_rows_; }
  void chain_begin(int32_t n, const vt::SampleRow *params) override {
    if (params || begun_.size() >= 2) throw std::logic_error("chain_begin: sampled rows, or a third read");
    begun_.emplace_back(next_.begin(), next_.begin() + n);
    begun_max = std::max(begun_max, int(begun_.size()));
  }
  void chain_end(int32_t *ids) override {
    if (begun_.empty()) throw std::logic_error("chain_end: no read begun");
    std::copy(begun_.front().begin(), begun_.front().end(), ids);
    begun_.erase(begun_.begin());
    if (after_read) after_read(++reads_ended);
  }

 protected:
  // A forward's first call: sizes the picks, and for a chained step checks there is a read to take tokens from.
  void begin_step(const vt::ForwardBatch &b) {
    while (held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    next_.assign(size_t(b.n_tokens), 0);
    if (!b.tokens_from_picks) return;
    if (begun_.empty() || int32_t(begun_.back().size()) < b.n_tokens) throw std::logic_error("picks without a read");
    ++chained_steps;
  }
  // Row r's token: the batch's, or (a chained step) the pick of the read begun last.
  int32_t input(const vt::ForwardBatch &b, int32_t r) const {
    return b.tokens_from_picks ? begun_.back()[size_t(r)] : b.tokens[r];
  }
  std::vector<int32_t> next_;  // the current step's picks, row for row: set by the test's forward

 private:
  int32_t vocab_;
  bool chaining_;
  int32_t max_chain_rows_;
  std::vector<std::vector<int32_t>> begun_;  // begun reads, oldest first
};

// The engine's step events per request: its tokens and its finish events (exactly one expected).
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, std::vector<int32_t>> finishes;
  std::function<void(uint64_t, size_t)> on_token;  // on the step thread: (request, tokens so far)

  static void on_step(const vt_step_event *ev, int32_t n, void *user) {
    auto &self = *static_cast<Events *>(user);
    std::lock_guard<std::mutex> lock(self.mu);
    for (int32_t i = 0; i < n; ++i) {
      if (ev[i].token >= 0) {
        self.tokens[ev[i].request_id].push_back(ev[i].token);
        if (self.on_token) self.on_token(ev[i].request_id, self.tokens[ev[i].request_id].size());
      }
      if (ev[i].finish != VT_FINISH_NONE) self.finishes[ev[i].request_id].push_back(ev[i].finish);
    }
    self.cv.notify_all();
  }
  bool wait_finished(const std::vector<uint64_t> &ids, int seconds = 20) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(seconds), [&] {
      return std::all_of(ids.begin(), ids.end(), [&](uint64_t id) { return !finishes[id].empty(); });
    });
  }
  size_t count(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    return tokens[id].size();
  }
};

// The K/V-hash "model" the engine tests over a paged fake decoder share (test_engine_prefix_cache,
// test_engine_kv_growth): a token at a position stores key(token, pos) as its K/V, and the next token is a hash of
// every K/V before it (what attention over them decides), below vocab - 1 (the stop id). expected() recomputes a
// request's tokens from nothing, which a batched, cached, preempted or regrown run must match.
inline uint64_t key(int32_t token, int32_t pos) {
  return (uint64_t(uint32_t(token)) << 32 | uint32_t(pos)) * 0x9E3779B97F4A7C15ull + 1;
}
inline int32_t next_of(const uint64_t *kv, int32_t n, int32_t vocab) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t i = 0; i < n; ++i) h = (h ^ kv[i]) * 1099511628211ull;
  return int32_t((h >> 17) % uint64_t(vocab - 1));
}
inline std::vector<int32_t> expected(const std::vector<int32_t> &prompt, int32_t max_tokens, int32_t vocab) {
  std::vector<uint64_t> kv;
  std::vector<int32_t> out;
  for (size_t p = 0; p < prompt.size(); ++p) kv.push_back(key(prompt[p], int32_t(p)));
  while (int32_t(out.size()) < max_tokens) {
    const int32_t t = next_of(kv.data(), int32_t(kv.size()), vocab);
    out.push_back(t);
    kv.push_back(key(t, int32_t(kv.size())));
  }
  return out;
}

// A greedy request with no stop id: it runs to max_tokens.
inline vt_request_params greedy(int32_t max_tokens) {
  vt_request_params p = vt_request_default_params();
  p.max_tokens = max_tokens;
  p.temperature = 0;
  p.n_stop_ids = 0;
  return p;
}
// n prompt tokens from a seed, below vocab - 1; and two token lists one after the other.
inline std::vector<int32_t> span(int32_t seed, int32_t n, int32_t vocab) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back((seed * 17 + i * 7 + i * i) % (vocab - 1));
  return t;
}
inline std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace fake_engine
