// A KV pool that grows with demand, integers only (BlockManager::set_growth, trim; the scheduler over it): blocks
// come in chunks through the backend's resize callback, the lowest free block is handed out first, a mapping that
// comes short makes the mapped count the ceiling until the next trim (the scheduler preempts and waits as with a full
// fixed pool, and still completes every request), and a trim gives back the chunks above the base and the highest
// held block, evicting the cached blocks there (the prefix cache never serves a block that was unmapped).
// Last, a randomized run of the scheduler against a shadow device: chunks mapped zeroed and unmapped poisoned, the
// device's memory rising and falling, requests aborted and paused; every position a chunk attends to must hold what
// its own tokens put there, nothing may be read or written outside the mapped chunks, and every request finishes.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "block_manager.h"
#include "check.h"
#include "scheduler.h"

using vt::BlockManager;
using vt::PrefixChain;
using vt::Scheduler;
using vt::Sequence;

namespace {

using Tokens = std::vector<int32_t>;

constexpr uint64_t kUnmapped = 0xdeadbeefdeadbeefull;  // what a shadow device reads where nothing is mapped

// The backend's side: maps chunk by chunk up to what its memory allows (capacity blocks), unmaps on request, and
// keeps a shadow of every slot's K/V (zeroed when mapped, kUnmapped when not).
struct FakeDevice {
  int32_t ceiling, chunk, bs;
  int32_t capacity;  // blocks the device has memory for now
  int32_t mapped = 0;
  std::vector<uint64_t> kv;
  std::vector<int32_t> calls;  // the blocks asked for, in order
  int shortfalls = 0;
  bool args_ok = true;  // every request a whole number of chunks, or the ceiling

  FakeDevice(int32_t ceiling, int32_t chunk, int32_t bs, int32_t capacity)
      : ceiling(ceiling), chunk(chunk), bs(bs), capacity(capacity), kv(size_t(ceiling) * size_t(bs), kUnmapped) {}

  int32_t resize(int32_t blocks) {
    calls.push_back(blocks);
    args_ok &= (blocks % chunk == 0 || blocks == ceiling) && blocks >= 0 && blocks <= ceiling;
    if (blocks > mapped) {
      while (mapped < blocks) {
        const int32_t next = std::min(ceiling, (mapped / chunk + 1) * chunk);
        if (next > capacity) {
          ++shortfalls;
          break;
        }
        std::fill(kv.begin() + int64_t(mapped) * bs, kv.begin() + int64_t(next) * bs, 0);
        mapped = next;
      }
    } else {
      const int32_t keep = std::min(ceiling, (blocks + chunk - 1) / chunk * chunk);
      std::fill(kv.begin() + int64_t(keep) * bs, kv.begin() + int64_t(mapped) * bs, kUnmapped);
      mapped = std::max(keep, 0);
    }
    return mapped;
  }
  // Maps the first `blocks` at once, rounded up to whole chunks, as a load does (then hands them to set_growth).
  int32_t load(int32_t blocks) {
    const int32_t m = resize(std::min(ceiling, (blocks + chunk - 1) / chunk * chunk));
    calls.clear();
    return m;
  }
  BlockManager::Resize callback() {
    return [this](int32_t blocks) { return resize(blocks); };
  }
};

std::unique_ptr<Sequence> seq(uint64_t id, const Tokens &tokens) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = tokens;
  s->n_prompt = int32_t(tokens.size());
  s->max_tokens = 1000;
  return s;
}

Tokens span(int32_t seed, int32_t n) {
  Tokens t;
  for (int32_t i = 0; i < n; ++i) t.push_back((seed * 31 + i * 7) % 97);
  return t;
}

bool below_mapped(const std::vector<int32_t> &table, const BlockManager &bm) {
  return std::all_of(table.begin(), table.end(), [&](int32_t b) { return b >= 0 && b < bm.n_mapped(); });
}

// Blocks come through the callback in whole chunks, only when the mapped ones are short, never past the ceiling.
void growth_through_callback() {
  FakeDevice dev(100, 8, 4, 1000);
  BlockManager bm(100, 4);
  bm.set_growth(dev.load(8), 8, dev.callback());
  CHECK(bm.grows() && bm.n_blocks() == 100 && bm.n_mapped() == 8 && bm.n_limit() == 100);
  CHECK(bm.n_free() == 100 && bm.n_used() == 0 && bm.top() == 0);
  std::vector<int32_t> a, b, c;
  CHECK(bm.grow(a, 9) && a == (std::vector<int32_t>{0, 1, 2}) && dev.calls.empty());
  CHECK(bm.grow(b, 40) && b.size() == 10);  // 5 mapped free, 5 short: 8 + 5 = 13, a chunk boundary up: 16
  CHECK(dev.calls == std::vector<int32_t>{16} && bm.n_mapped() == 16 && dev.mapped == 16);
  CHECK(below_mapped(b, bm) && b.front() == 3 && b.back() == 12 && bm.n_used() == 13 && bm.n_free() == 87);
  CHECK(bm.grow(c, 4 * 80) && c.size() == 80);  // 3 free + 77 more: 93, a chunk boundary up: 96
  CHECK(dev.calls.back() == 96 && bm.n_mapped() == 96 && bm.n_free() == 7 && below_mapped(c, bm));
  std::vector<int32_t> d;
  CHECK(!bm.grow(d, 4 * 8) && d.empty() && dev.calls.size() == 2);  // past the ceiling: no call, nothing taken
  CHECK(dev.args_ok && bm.top() == 93);
}

// The lowest free block first, whatever order blocks came back in: used blocks stay at the bottom.
void lowest_first() {
  BlockManager bm(32, 2);
  std::vector<int32_t> a, b, c, d;
  CHECK(bm.grow(a, 8) && bm.grow(b, 8) && bm.grow(c, 8));  // 0..3, 4..7, 8..11
  CHECK(a == (std::vector<int32_t>{0, 1, 2, 3}) && c == (std::vector<int32_t>{8, 9, 10, 11}));
  bm.release(c);
  bm.release(a);
  CHECK(bm.grow(d, 12) && d == (std::vector<int32_t>{0, 1, 2, 3, 8, 9}));
  CHECK(bm.top() == 10);
  bm.release(b);
  std::vector<int32_t> e;
  CHECK(bm.grow(e, 6) && e == (std::vector<int32_t>{4, 5, 6}));
}

// A mapping that comes short: all or nothing for that grow, what was mapped stays mapped and free, and the mapped
// count is the ceiling (no more calls) until a trim gives the device another chance.
void mapping_comes_short() {
  FakeDevice dev(64, 8, 4, 24);  // the device has memory for 24 blocks
  BlockManager bm(64, 4);
  bm.set_growth(dev.load(8), 8, dev.callback());
  std::vector<int32_t> a, b;
  CHECK(bm.grow(a, 4 * 6));
  CHECK(!bm.grow(b, 4 * 30) && b.empty());  // 2 free + 28 more: 36, a chunk boundary up: 40; the device stops at 24
  CHECK(dev.calls == std::vector<int32_t>{40} && dev.shortfalls == 1);
  CHECK(bm.n_mapped() == 24 && bm.n_limit() == 24 && bm.n_free() == 18 && bm.n_used() == 6);
  CHECK(bm.grow(b, 4 * 18) && b.size() == 18 && below_mapped(b, bm) && dev.calls.size() == 1);  // within the mapped
  std::vector<int32_t> c;
  CHECK(bm.n_free() == 0 && !bm.grow(c, 4) && dev.calls.size() == 1);  // full: no call while the limit stands
  bm.release(b);
  bm.release(a);
  dev.capacity = 64;  // memory came free
  CHECK(bm.trim(8) == 8 && bm.n_limit() == 64 && dev.mapped == 8);
  CHECK(bm.grow(c, 4 * 40) && bm.n_mapped() == 40 && bm.n_limit() == 64 && below_mapped(c, bm));
  CHECK(dev.args_ok);
}

// Trim keeps the base and everything up to the highest held block (whole chunks), evicts the cached blocks above
// (counted apart from evictions for new K/V), keeps those below, and a later match never finds an evicted one.
void trim_with_prefix_cache() {
  const int32_t bs = 4;
  FakeDevice dev(64, 8, bs, 64);
  BlockManager bm(64, bs, /*prefix_caching=*/true);
  bm.set_growth(dev.load(8), 8, dev.callback());
  const Tokens low = span(1, 6 * bs), high = span(2, 20 * bs);
  std::vector<int32_t> a, b;
  PrefixChain ca, cb;
  CHECK(bm.grow(a, int64_t(low.size())) && bm.grow(b, int64_t(high.size())));  // a: 0..5, b: 6..25
  bm.publish(low.data(), int32_t(low.size()), a, ca);
  bm.publish(high.data(), int32_t(high.size()), b, cb);
  CHECK(bm.n_cached() == 26 && bm.n_mapped() == 32 && bm.top() == 26);
  bm.release(a);
  CHECK(bm.trim(8) == 32 && dev.mapped == 32);  // b holds blocks up to 25: nothing above its chunk goes
  bm.release(b);
  CHECK(bm.n_used() == 0 && bm.n_evictable() == 26 && bm.top() == 26);
  CHECK(bm.trim(8) == 8 && dev.mapped == 8 && bm.n_mapped() == 8);
  CHECK(bm.trimmed() == 18 && bm.evictions() == 0 && bm.n_cached() == 8 && bm.n_evictable() == 8 && bm.top() == 8);
  std::vector<int32_t> t;
  PrefixChain ct;
  CHECK(bm.match(low.data(), int32_t(low.size()), t, ct) == int32_t(low.size()));  // in the base: still cached
  bm.release(t);
  CHECK(bm.match(high.data(), int32_t(high.size()), t, ct) == 2 * bs);  // its first 2 blocks were 6 and 7
  CHECK(t == (std::vector<int32_t>{6, 7}) && below_mapped(t, bm));
  bm.release(t);
  // A trim to less than the base keeps whole chunks; one with nothing to give back changes nothing.
  CHECK(bm.trim(3) == 8 && bm.trim(8) == 8 && dev.args_ok);
  // A fixed pool ignores trims.
  BlockManager fixed(16, 4, true);
  std::vector<int32_t> f;
  CHECK(fixed.grow(f, 40) && fixed.trim(0) == 16 && fixed.n_mapped() == 16 && !fixed.grows());
}

// The scheduler over a growing pool whose device runs out part-way: running sequences are preempted (the newest
// first) and waiting ones wait, as with a full fixed pool, and every request finishes with all its tokens.
void scheduler_when_mapping_fails() {
  const int32_t bs = 4;
  FakeDevice dev(200, 8, bs, 40);  // memory for 40 blocks; the ceiling says 200
  BlockManager bm(200, bs);
  bm.set_growth(dev.load(16), 8, dev.callback());
  Scheduler sch({8, 64}, bm);
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= 8; ++id) {
    auto s = seq(id, span(int32_t(id), 10 + int32_t(id)));
    s->max_tokens = 40;
    sch.add(std::move(s));
    ids.push_back(id);
  }
  int32_t finished = 0, steps = 0;
  bool ok = true;
  while (finished < 8 && steps < 2000) {
    auto plan = sch.schedule();
    ok &= !plan.empty();  // one sequence always fits in the mapped blocks: never stuck
    if (plan.empty()) break;
    for (const auto &c : plan) ok &= below_mapped(c.seq->block_table, bm);
    sch.commit(plan);
    for (const auto &c : plan) {
      if (!c.sample) continue;
      c.seq->tokens.push_back(1);
      if (c.seq->n_generated() >= c.seq->max_tokens) {
        sch.remove(c.seq->id);
        ++finished;
      }
    }
    ++steps;
  }
  CHECK(ok && finished == 8 && sch.idle());
  CHECK(dev.shortfalls == 1 && bm.n_limit() == 40 && bm.n_mapped() == 40 && sch.preemptions() > 0);
  CHECK(bm.n_used() == 0 && bm.trim(16) == 16 && bm.n_limit() == 200 && dev.args_ok);
}

// Growth and trim across preemption and abort: an aborted request's blocks come back (lowest first to the next), a
// preempted one is recomputed, and once nothing runs a trim returns the pool to its base.
void preemption_and_abort() {
  const int32_t bs = 2;
  FakeDevice dev(48, 8, bs, 48);
  BlockManager bm(48, bs, true);
  bm.set_growth(dev.load(8), 8, dev.callback());
  Scheduler sch({4, 256}, bm);
  sch.add(seq(1, span(1, 30)));  // 15 blocks
  sch.add(seq(2, span(2, 30)));  // 15 more: 30 of 48
  auto plan = sch.schedule();
  CHECK(plan.size() == 2 && bm.n_mapped() == 32 && dev.calls == (std::vector<int32_t>{16, 32}));
  sch.commit(plan);
  for (const auto &c : plan) c.seq->tokens.push_back(3);
  sch.remove(1);  // an abort: its blocks go back, cached (full ones) or free
  sch.add(seq(3, span(3, 40)));  // 20 blocks: 2 mapped free + evicted cached ones, then a chunk more
  plan = sch.schedule();
  CHECK(plan.size() == 2 && sch.find(3) && below_mapped(sch.find(3)->block_table, bm));
  sch.commit(plan);
  for (const auto &c : plan) c.seq->tokens.push_back(3);
  sch.add(seq(4, span(4, 30)));  // does not fit beside them: waits
  plan = sch.schedule();
  CHECK(sch.n_waiting() == 1);
  sch.commit(plan);
  for (const auto &c : plan) c.seq->tokens.push_back(3);
  // Sequence 2 grows until the pool is dry: 3 (the newest running) is preempted for it.
  for (int i = 0; i < 20 && sch.preemptions() == 0; ++i) {
    sch.find(2)->max_tokens = 1000;
    plan = sch.schedule();
    sch.commit(plan);
    for (const auto &c : plan) c.seq->tokens.push_back(3);
  }
  CHECK(sch.preemptions() > 0 && bm.n_mapped() == 48);
  for (uint64_t id : sch.ids()) sch.remove(id);
  CHECK(bm.n_used() == 0 && sch.idle());
  CHECK(bm.trim(8) == 8 && dev.mapped == 8 && bm.n_free() == 48 && bm.top() <= 8 && dev.args_ok);
}

// ---- randomized: the scheduler against a shadow device ----

int64_t g_grows = 0, g_shortfalls = 0, g_trims = 0, g_trimmed = 0, g_hits = 0, g_preemptions = 0;

uint64_t fingerprint(const Tokens &t, int32_t p) {  // what position p's K/V depend on: tokens[0..p]
  uint64_t h = 1469598103934665603ull;
  for (int32_t i = 0; i <= p; ++i) h = (h ^ uint32_t(t[size_t(i)])) * 1099511628211ull;
  return h | 1;  // never 0 (a freshly mapped slot)
}

void randomized(uint64_t seed, bool caching) {
  g_rng.seed(seed);
  const int32_t bs = 1 + int32_t(below(4)), chunk = 2 + int32_t(below(6)), ceiling = 40 + int32_t(below(60));
  const int32_t max_len = 12 + int32_t(below(12));
  const int32_t base = std::max<int32_t>(chunk, (max_len + bs - 1) / bs);  // one sequence of max_len always fits
  FakeDevice dev(ceiling, chunk, bs, ceiling);
  BlockManager bm(ceiling, bs, caching);
  bm.set_growth(dev.load(base), chunk, dev.callback());
  const int32_t kept = bm.n_mapped();
  Scheduler sch({int32_t(2 + below(6)), int32_t(4 + below(40))}, bm);
  std::vector<Tokens> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(span(int32_t(seed) * 3 + i, int32_t(below(12))));
  uint64_t next_id = 1;
  int64_t submitted = 0, ended = 0;
  bool ok = true;
  for (int step = 0; step < 600 && ok; ++step) {
    if (step < 500 && below(3) == 0) {
      Tokens t = prefixes[size_t(below(3))];
      for (int64_t n = 1 + below(8); n > 0; --n) t.push_back(int32_t(below(5)));
      if (int32_t(t.size()) > max_len - 4) t.resize(size_t(max_len - 4));
      auto s = seq(next_id++, t);
      s->max_tokens = int32_t(1 + below(std::min<int64_t>(10, max_len - int32_t(t.size()))));
      if (below(5) == 0) s->allowed_tokens = int32_t(below(3));
      sch.add(std::move(s));
      ++submitted;
    }
    if (below(7) == 0) dev.capacity = int32_t(below(ceiling + 1));  // other processes take and give back memory
    std::vector<uint64_t> ids = sch.ids();
    if (!ids.empty() && below(12) == 0) {  // an abort
      sch.remove(ids[size_t(below(int64_t(ids.size())))]);
      ++ended;
    }
    for (uint64_t id : sch.ids())
      if (Sequence *s = sch.find(id); s && s->allowed_tokens >= 0 && below(3) == 0) s->allowed_tokens += 1;
    auto plan = sch.schedule();
    ok &= !plan.empty() || sch.active_ids().empty();  // never stuck, however the device came short
    ok &= bm.n_mapped() == dev.mapped && bm.n_mapped() >= kept && bm.n_limit() >= bm.n_mapped();
    for (const auto &c : plan) {
      const Sequence &s = *c.seq;
      ok &= below_mapped(s.block_table, bm);
      for (int32_t q = 0; q < c.pos0; ++q)  // what it attends to holds its own tokens' K/V
        ok &= dev.kv[size_t(s.block_table[size_t(q / bs)]) * bs + q % bs] == fingerprint(s.tokens, q);
    }
    for (uint64_t id : sch.ids()) ok &= below_mapped(sch.find(id)->block_table, bm);  // paused ones too
    CHECK(ok);
    for (const auto &c : plan)
      for (int32_t q = c.pos0; q < c.pos0 + c.n_tokens; ++q) {
        uint64_t &slot = dev.kv[size_t(c.seq->block_table[size_t(q / bs)]) * bs + q % bs];
        ok &= slot != kUnmapped;  // (a write to an unmapped block would fault)
        slot = fingerprint(c.seq->tokens, q);
      }
    sch.commit(plan);
    for (const auto &c : plan) {
      if (!c.sample) continue;
      Sequence &s = *c.seq;
      s.tokens.push_back(int32_t(fingerprint(s.tokens, int32_t(s.tokens.size()) - 1) % 5));  // the "model"
      if (s.n_generated() >= s.max_tokens) {
        sch.remove(s.id);
        ++ended;
      }
    }
    if (sch.ids().empty() && bm.n_mapped() > kept) {  // idle: the engine trims back to the base
      const int64_t before = bm.trimmed();
      ok &= bm.trim(kept) == kept && dev.mapped == kept && bm.n_limit() == ceiling && bm.top() <= kept;
      ++g_trims, g_trimmed += bm.trimmed() - before;
    }
  }
  // The rest run to the end with the device's memory back, each allowed all it wants.
  dev.capacity = ceiling;
  for (uint64_t id : sch.ids()) sch.find(id)->allowed_tokens = -1;
  for (int step = 0; step < 5000 && !sch.ids().empty() && ok; ++step) {
    auto plan = sch.schedule();
    ok &= !plan.empty();
    sch.commit(plan);
    for (const auto &c : plan)
      if (c.sample && (c.seq->tokens.push_back(1), c.seq->n_generated() >= c.seq->max_tokens)) {
        sch.remove(c.seq->id);
        ++ended;
      }
  }
  CHECK(ok && ended == submitted && bm.n_used() == 0 && dev.args_ok);
  g_grows += int64_t(dev.calls.size()), g_shortfalls += dev.shortfalls, g_hits += sch.prefix_hit_tokens();
  g_preemptions += sch.preemptions();
  if (!ok) std::printf("  (randomized seed %llu, caching %d)\n", (unsigned long long)seed, int(caching));
}

}  // namespace

int main() {
  growth_through_callback();
  lowest_first();
  mapping_comes_short();
  trim_with_prefix_cache();
  scheduler_when_mapping_fails();
  preemption_and_abort();
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    randomized(seed, true);
    randomized(seed, false);
  }
  std::printf("randomized: %lld resizes, %lld came short, %lld trims dropping %lld cached blocks, %lld tokens found "
              "cached, %lld preemptions\n",
              (long long)g_grows, (long long)g_shortfalls, (long long)g_trims, (long long)g_trimmed, (long long)g_hits,
              (long long)g_preemptions);
  CHECK(g_grows > 0 && g_shortfalls > 0 && g_trims > 0 && g_trimmed > 0 && g_hits > 0 && g_preemptions > 0);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
