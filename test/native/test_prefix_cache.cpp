// The prefix cache, integers only (some of it again with every key's hash colliding, where only the exact comparison
// of parent and tokens keeps prefixes apart): the block manager's reference counts, publication of full blocks only, identity
// by the whole prefix (a block's tokens under its parent's entry), least-recently-released eviction after the free
// blocks, and the scheduler's use of it (a waiting sequence starts from its longest cached prefix in whole blocks,
// never past its last token, not at all for teacher forcing; preemption and paused eviction with shared blocks).
// Last, a randomized run of the scheduler against a shadow KV pool: every position a chunk attends to must hold
// what its own tokens put there, and no chunk may write into a shared or cached block.
#include <cstdio>
#include <map>
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

Tokens cat(Tokens a, const Tokens &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A sequence that has computed `tokens` into blocks of its own and published them, as the scheduler's commit does.
struct Held {
  Tokens tokens;
  std::vector<int32_t> table;
  PrefixChain chain;
};

Held computed(BlockManager &bm, const Tokens &tokens) {
  Held h{tokens, {}, {}};
  const int32_t hit = bm.match(tokens.data(), int32_t(tokens.size()) - 1, h.table, h.chain);
  CHECK(bm.grow(h.table, int64_t(tokens.size())));
  (void)hit;
  bm.publish(h.tokens.data(), int32_t(tokens.size()), h.table, h.chain);
  return h;
}

int32_t lookup(BlockManager &bm, const Tokens &tokens, std::vector<int32_t> *blocks = nullptr) {
  std::vector<int32_t> table;
  PrefixChain chain;
  const int32_t n = bm.match(tokens.data(), int32_t(tokens.size()), table, chain);
  if (blocks) *blocks = table;
  bm.release(table);
  return n;
}

Tokens range(int32_t from, int32_t n) {
  Tokens t;
  for (int32_t i = 0; i < n; ++i) t.push_back(from + i);
  return t;
}

// Full blocks are published and shared by reference; the partial last block never is.
void publish_and_share() {
  BlockManager bm(16, 4, true);
  Held a = computed(bm, range(100, 10));  // blocks: [100..103] [104..107] and a partial [108, 109]
  CHECK(a.table.size() == 3 && bm.n_cached() == 2 && bm.n_used() == 3 && a.chain.n_blocks == 2);
  CHECK(!bm.cached(a.table[2]));
  // Another sequence with the same first 10 tokens and more: the two full blocks, not the partial one.
  std::vector<int32_t> table;
  PrefixChain chain;
  const Tokens b = cat(range(100, 10), range(500, 6));
  CHECK(bm.match(b.data(), int32_t(b.size()) - 1, table, chain) == 8);
  CHECK(table.size() == 2 && table[0] == a.table[0] && table[1] == a.table[1]);
  CHECK(bm.refs(a.table[0]) == 2 && bm.refs(a.table[1]) == 2 && bm.n_used() == 3);  // shared blocks count once
  // max_tokens caps the match to whole blocks below it.
  std::vector<int32_t> t2;
  PrefixChain c2;
  CHECK(bm.match(b.data(), 7, t2, c2) == 4 && t2.size() == 1 && c2.n_blocks == 1);
  bm.release(t2);
  // Letting go: a shared block is freed only by its last holder; cached ones become evictable, not free.
  bm.release(a.table);
  CHECK(bm.refs(table[0]) == 1 && bm.n_used() == 2 && bm.n_evictable() == 0);
  bm.release(table);
  CHECK(bm.n_used() == 0 && bm.n_free() == 16 && bm.n_evictable() == 2 && bm.n_cached() == 2);
  CHECK(lookup(bm, b) == 8);  // still found
  // Matching takes evictable blocks back out of the eviction order.
  std::vector<int32_t> t3;
  PrefixChain c3;
  bm.match(b.data(), 16, t3, c3);
  CHECK(t3.size() == 2 && bm.n_evictable() == 0 && bm.n_used() == 2 && bm.n_free() == 14);
  bm.release(t3);
}

// A block is identified by its tokens and everything before them: the same 4 tokens after different prefixes are
// different entries, and a lookup walks from the first block.
void identity_is_the_whole_prefix(uint64_t hash_mask) {
  BlockManager bm(16, 4, true, hash_mask);
  const Tokens y = range(7, 4);
  Held a = computed(bm, cat(range(100, 4), y));
  Held b = computed(bm, cat(range(200, 4), y));
  CHECK(bm.n_cached() == 4 && a.table[1] != b.table[1]);
  std::vector<int32_t> found;
  CHECK(lookup(bm, cat(cat(range(200, 4), y), range(1, 4)), &found) == 8);
  CHECK(found.size() == 2 && found[0] == b.table[0] && found[1] == b.table[1]);
  CHECK(lookup(bm, cat(range(300, 4), y)) == 0);  // y alone, after an unknown block: nothing
  CHECK(lookup(bm, cat(range(101, 4), y)) == 0);  // one token off in the first block
  Tokens c = cat(range(100, 4), y);
  c[7] = 99;  // one token off in the second block
  CHECK(lookup(bm, c) == 4);
  bm.release(a.table);
  bm.release(b.table);
}

// Allocation takes truly free blocks first, then evicts cached blocks nobody holds, least recently released first;
// a released sequence's last block goes before the blocks it continues.
void lru_eviction() {
  BlockManager bm(6, 2, true);
  Held a = computed(bm, range(10, 4));  // 2 blocks
  Held b = computed(bm, range(20, 4));  // 2 blocks
  bm.release(a.table);                  // a released first: the least recent
  bm.release(b.table);
  CHECK(bm.n_free() == 6 && bm.n_evictable() == 4 && bm.n_cached() == 4);
  std::vector<int32_t> t;
  CHECK(bm.grow(t, 4) && bm.evictions() == 0 && bm.n_cached() == 4);  // the 2 truly free blocks
  CHECK(bm.grow(t, 6) && bm.evictions() == 1 && bm.n_cached() == 3);  // a's last block
  CHECK(lookup(bm, range(20, 4)) == 4);
  CHECK(lookup(bm, range(10, 4)) == 2);  // a lookup holds and lets go: a's first block is now the most recent
  CHECK(bm.grow(t, 8) && bm.evictions() == 2);  // b's last block, now the least recent
  CHECK(lookup(bm, range(10, 4)) == 2);
  CHECK(lookup(bm, range(20, 4)) == 2);
  CHECK(bm.grow(t, 12) && bm.evictions() == 4 && bm.n_cached() == 0 && bm.n_free() == 0);
  CHECK(!bm.grow(t, 14));  // all or nothing, as before
  bm.release(t);
  CHECK(bm.n_free() == 6 && bm.n_evictable() == 0);
}

// Two sequences computing the same prefix at once: the first to publish owns the entry; the other keeps its copy
// private (freed, not cached, when released) and its chain follows the entry, so its later blocks are found after it.
void duplicate_publication() {
  BlockManager bm(16, 4, true);
  const Tokens p = range(50, 8);
  Held a{p, {}, {}}, b{cat(p, range(900, 4)), {}, {}};
  CHECK(bm.grow(a.table, 8) && bm.grow(b.table, 12));
  bm.publish(a.tokens.data(), 8, a.table, a.chain);
  bm.publish(b.tokens.data(), 12, b.table, b.chain);
  CHECK(bm.n_cached() == 3 && !bm.cached(b.table[0]) && !bm.cached(b.table[1]) && bm.cached(b.table[2]));
  CHECK(b.chain.n_blocks == 3 && b.chain.block == b.table[2]);
  std::vector<int32_t> found;
  CHECK(lookup(bm, cat(b.tokens, {1}), &found) == 12);
  CHECK(found[0] == a.table[0] && found[1] == a.table[1] && found[2] == b.table[2]);
  bm.release(b.table);
  CHECK(bm.n_evictable() == 1 && bm.n_used() == 2);
  bm.release(a.table);
  CHECK(bm.n_evictable() == 3 && bm.n_used() == 0 && bm.n_free() == 16);
}

// A chain whose entry was evicted stops publishing: what it would publish could never be found.
void evicted_chain_stops() {
  BlockManager bm(4, 2, true);
  const Tokens p = range(30, 2);
  Held a = computed(bm, p);            // entry in a's block
  Held b{cat(p, range(60, 2)), {}, {}};
  CHECK(bm.grow(b.table, 2));
  bm.publish(b.tokens.data(), 2, b.table, b.chain);  // b's first block duplicates a's: b's chain is a's entry
  bm.release(a.table);                 // a's entry is evictable; b does not hold it
  std::vector<int32_t> t;
  CHECK(bm.grow(t, 6) && bm.evictions() == 1);  // 2 free, then a's entry
  bm.release(t);
  CHECK(bm.grow(b.table, 4));
  bm.publish(b.tokens.data(), 4, b.table, b.chain);
  CHECK(bm.n_cached() == 0 && b.chain.n_blocks == 1);
  bm.release(b.table);
  CHECK(bm.n_free() == 4);
}

void caching_off() {
  BlockManager bm(8, 4);
  Held a = computed(bm, range(1, 8));
  CHECK(bm.n_cached() == 0 && lookup(bm, range(1, 8)) == 0);
  bm.release(a.table);
  CHECK(bm.n_free() == 8 && bm.n_evictable() == 0);
}

// ---- the scheduler ----

std::unique_ptr<Sequence> seq(uint64_t id, const Tokens &tokens) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = tokens;
  s->n_prompt = int32_t(tokens.size());
  s->max_tokens = 1000;
  return s;
}

// Runs a plan as the engine would: commit, then append a token to every sequence that sampled.
void run(Scheduler &sch, const std::vector<vt::ScheduledChunk> &plan, int32_t token = 1) {
  sch.commit(plan);
  for (auto &c : plan)
    if (c.sample) c.seq->tokens.push_back(token);
}

const vt::ScheduledChunk *chunk_of(const std::vector<vt::ScheduledChunk> &plan, uint64_t id) {
  for (const auto &c : plan)
    if (c.seq->id == id) return &c;
  return nullptr;
}

// A second sequence with the same system prompt starts after the cached blocks; one with the same whole prompt
// recomputes its last block (its last token must run, and never in a shared block).
void shared_prompt() {
  BlockManager bm(64, 4, true);
  Scheduler sch({8, 512}, bm);
  const Tokens system = range(1000, 10);
  sch.add(seq(1, cat(system, range(1, 3))));
  auto p = sch.schedule();
  CHECK(p.size() == 1 && p[0].pos0 == 0 && p[0].n_tokens == 13);
  run(sch, p);
  CHECK(bm.n_cached() == 3 && sch.prefix_queries() == 1 && sch.prefix_hit_tokens() == 0);
  sch.add(seq(2, cat(system, range(5, 6))));  // shares the first 2 blocks (8 tokens) of the system prompt
  sch.add(seq(3, cat(system, range(1, 2))));  // the first 12 tokens of seq 1: 3 cached blocks, but 12 is its length
  sch.add(seq(4, cat(system, range(1, 3))));  // seq 1's whole 13-token prompt: blocks 0-2, then token 12
  p = sch.schedule();
  const auto *c1 = chunk_of(p, 1), *c2 = chunk_of(p, 2), *c3 = chunk_of(p, 3), *c4 = chunk_of(p, 4);
  CHECK(c1 && c1->n_tokens == 1);
  CHECK(c2 && c2->pos0 == 8 && c2->n_tokens == 8 && c2->sample);
  CHECK(c3 && c3->pos0 == 8 && c3->n_tokens == 4 && c3->sample);  // recomputes its last block
  CHECK(c4 && c4->pos0 == 12 && c4->n_tokens == 1 && c4->sample);
  CHECK(c2->seq->block_table[0] == c1->seq->block_table[0] && c2->seq->block_table[1] == c1->seq->block_table[1]);
  CHECK(c3->seq->block_table[2] != c1->seq->block_table[2] && bm.refs(c1->seq->block_table[2]) == 2);
  CHECK(sch.prefix_queries() == 4 && sch.prefix_query_tokens() == 13 + 16 + 12 + 13);
  CHECK(sch.prefix_hit_tokens() == 8 + 8 + 12);
  run(sch, p);
  for (uint64_t id = 1; id <= 4; ++id) sch.remove(id);
  CHECK(bm.n_used() == 0 && bm.n_free() == 64);
}

// A chat's second turn (first prompt + first reply + more) finds the blocks the first turn's decode filled.
void multi_turn() {
  BlockManager bm(64, 4, true);
  Scheduler sch({8, 512}, bm);
  sch.add(seq(1, range(10, 5)));
  for (int i = 0; i < 8; ++i) run(sch, sch.schedule(), 40 + i);  // 5 prompt tokens, then 8 generated
  Sequence *one = sch.find(1);
  CHECK(one->tokens.size() == 13 && one->n_computed == 12 && bm.n_cached() == 3);
  const Tokens turn2 = cat(one->tokens, range(70, 5));
  sch.remove(1);
  sch.add(seq(2, turn2));
  auto p = sch.schedule();
  CHECK(p.size() == 1 && p[0].pos0 == 12 && p[0].n_tokens == 6 && sch.prefix_hit_tokens() == 12);
  run(sch, p);
  sch.remove(2);
}

// Teacher forcing needs the logits of every prompt position from the next one it reports: it does not look up
// (then, after a preemption, only below what it already reported).
void prompt_logprobs_bypass() {
  BlockManager bm(64, 4, true);
  Scheduler sch({8, 512}, bm);
  sch.add(seq(1, range(10, 12)));
  run(sch, sch.schedule());
  auto s = seq(2, range(10, 12));
  s->prompt_logprobs = true;
  sch.add(std::move(s));
  auto p = sch.schedule();
  const auto *c = chunk_of(p, 2);
  CHECK(c && c->pos0 == 0 && c->n_tokens == 12 && sch.prefix_queries() == 1);
  run(sch, p);
  // As if it had reported prompt tokens 1 .. 8 before a preemption: positions 8 .. 10 must be computed again.
  auto t = seq(3, range(10, 12));
  t->prompt_logprobs = true;
  t->prompt_logprobs_done = 9;
  sch.add(std::move(t));
  p = sch.schedule();
  c = chunk_of(p, 3);
  CHECK(c && c->pos0 == 8 && c->n_tokens == 4);
}

// Preemption lets go of the newest sequence's references; blocks it shared stay with their other holder, and the
// cached ones are found again when it is re-admitted.
void preemption_with_shared_blocks() {
  BlockManager bm(6, 4, true);  // 24 tokens
  Scheduler sch({8, 512}, bm);
  const Tokens system = range(100, 8);
  sch.add(seq(1, cat(system, {1})));
  run(sch, sch.schedule());  // seq 1: 3 blocks (2 published)
  sch.add(seq(2, cat(system, {2})));
  auto p = sch.schedule();
  const auto *c2 = chunk_of(p, 2);
  CHECK(c2 && c2->pos0 == 8 && c2->n_tokens == 1 && bm.n_used() == 4);
  run(sch, p);
  Sequence *one = sch.find(1), *two = sch.find(2);
  // Decode both until the pool is short: seq 1 grows, seq 2 (the newest) is preempted.
  int guard = 0;
  while (sch.preemptions() == 0 && ++guard < 40) run(sch, sch.schedule());
  CHECK(sch.preemptions() == 1 && sch.n_waiting() == 1 && two->block_table.empty() && two->n_computed == 0);
  CHECK(bm.refs(one->block_table[0]) == 1 && bm.refs(one->block_table[1]) == 1);  // seq 1 still holds the shared ones
  sch.remove(1);
  const int64_t hits = sch.prefix_hit_tokens();
  p = sch.schedule();  // re-admitted: the system prompt's blocks (and whatever of its own is still cached)
  c2 = chunk_of(p, 2);
  CHECK(c2 && c2->pos0 >= 8 && c2->pos0 % 4 == 0 && c2->pos0 + c2->n_tokens == int32_t(two->tokens.size()));
  CHECK(sch.prefix_hit_tokens() - hits == c2->pos0 && sch.prefix_queries() == 3);
  run(sch, p);
  sch.remove(2);
  CHECK(bm.n_used() == 0);
}

// A paused sequence's blocks count as room for a waiting one only where no running sequence shares them.
void paused_blocks_shared_with_running() {
  BlockManager bm(6, 4, true);
  Scheduler sch({8, 512}, bm);
  const Tokens system = range(100, 8);
  sch.add(seq(1, cat(system, range(1, 3))));  // 11 tokens: 3 blocks
  run(sch, sch.schedule());
  auto s2 = seq(2, cat(system, range(5, 3)));  // shares 2 blocks, 1 of its own; paused after 1 token
  s2->allowed_tokens = 1;
  sch.add(std::move(s2));
  auto p = sch.schedule();
  run(sch, p);
  p = sch.schedule();
  Sequence *two = sch.find(2);
  // seq 1 took a 4th block: 5 held (2 shared), 1 free.
  CHECK(sch.n_paused() == 1 && two->block_table.size() == 3 && bm.n_used() == 5 && bm.n_free() == 1);
  // 4 blocks wanted: 1 free + 1 that only the paused one holds = 2, not enough: nobody is evicted.
  sch.add(seq(3, range(500, 13)));
  run(sch, p);
  p = sch.schedule();
  CHECK(!chunk_of(p, 3) && two->block_table.size() == 3 && sch.n_waiting() == 1);
  CHECK(sch.find(3)->block_table.empty() && sch.find(3)->n_computed == 0);  // a waiting one holds nothing
  run(sch, p);
  sch.remove(1);  // now the paused one alone holds its 3 blocks: 2 free + 3 = 5 >= 4, it is evicted
  p = sch.schedule();
  CHECK(chunk_of(p, 3) && two->block_table.empty() && sch.preemptions() == 1);
  run(sch, p);
  sch.remove(3);
  two->allowed_tokens = -1;
  p = sch.schedule();  // recomputed from what is still cached
  CHECK(chunk_of(p, 2) && chunk_of(p, 2)->pos0 % 4 == 0);
  run(sch, p);
  sch.remove(2);
  CHECK(bm.n_used() == 0 && bm.n_free() == 6);
}

// ---- randomized: the scheduler against a shadow KV pool ----

int64_t g_hit_tokens = 0, g_evictions = 0, g_preemptions = 0;  // over every randomized run: that it exercised them

uint64_t fingerprint(const Tokens &t, int32_t p) {  // what position p's K/V depend on: tokens[0..p]
  uint64_t h = 1469598103934665603ull;
  for (int32_t i = 0; i <= p; ++i) h = (h ^ uint32_t(t[size_t(i)])) * 1099511628211ull;
  return h;
}

void randomized(uint64_t seed, bool caching, uint64_t hash_mask = ~uint64_t(0)) {
  g_rng.seed(seed);
  const int32_t bs = 1 + int32_t(below(4)), n_blocks = 24 + int32_t(below(24));
  BlockManager bm(n_blocks, bs, caching, hash_mask);
  Scheduler sch({int32_t(2 + below(5)), int32_t(4 + below(40))}, bm);
  std::vector<uint64_t> kv(size_t(n_blocks) * size_t(bs), 0);
  std::vector<Tokens> prefixes;
  for (int i = 0; i < 3; ++i) {
    Tokens t;
    for (int64_t n = below(20); n > 0; --n) t.push_back(int32_t(below(3)));
    prefixes.push_back(t);
  }
  uint64_t next_id = 1;
  const int32_t max_len = n_blocks * bs / 3;  // any one sequence fits with room to spare
  bool ok = true;
  for (int step = 0; step < 400 && ok; ++step) {
    if (below(3) == 0) {
      Tokens t = prefixes[size_t(below(3))];
      for (int64_t n = 1 + below(8); n > 0; --n) t.push_back(int32_t(below(4)));
      if (int32_t(t.size()) > max_len - 4) t.resize(size_t(max_len - 4));
      if (t.empty()) t.push_back(0);
      auto s = seq(next_id++, t);
      s->max_tokens = int32_t(1 + below(std::min<int64_t>(12, max_len - int32_t(t.size()))));
      s->prompt_logprobs = below(8) == 0;
      if (below(4) == 0) s->allowed_tokens = int32_t(below(3));
      sch.add(std::move(s));
    }
    std::vector<uint64_t> ids = sch.ids();
    if (!ids.empty() && below(10) == 0) sch.remove(ids[size_t(below(int64_t(ids.size())))]);  // an abort
    for (uint64_t id : sch.ids())
      if (Sequence *s = sch.find(id); s && s->allowed_tokens >= 0 && below(3) == 0) s->allowed_tokens += 1;
    auto plan = sch.schedule();
    ok &= !plan.empty() || sch.active_ids().empty();  // one sequence always fits: an empty plan means nothing to run
    for (const auto &c : plan) {
      const Sequence &s = *c.seq;
      ok &= c.n_tokens >= 1 && c.pos0 == s.n_computed && c.sample == (c.pos0 + c.n_tokens == int32_t(s.tokens.size()));
      for (int32_t q = 0; q < c.pos0; ++q)  // what it attends to holds its own tokens' K/V
        ok &= kv[size_t(s.block_table[size_t(q / bs)]) * bs + q % bs] == fingerprint(s.tokens, q);
      for (int32_t q = c.pos0; q < c.pos0 + c.n_tokens; ++q) {  // where it writes is its own, unpublished
        const int32_t b = s.block_table[size_t(q / bs)];
        ok &= bm.refs(b) == 1 && !bm.cached(b);
      }
    }
    CHECK(ok);
    for (const auto &c : plan)
      for (int32_t q = c.pos0; q < c.pos0 + c.n_tokens; ++q)
        kv[size_t(c.seq->block_table[size_t(q / bs)]) * bs + q % bs] = fingerprint(c.seq->tokens, q);
    sch.commit(plan);
    for (const auto &c : plan) {
      if (!c.sample) continue;
      Sequence &s = *c.seq;
      s.tokens.push_back(int32_t(fingerprint(s.tokens, int32_t(s.tokens.size()) - 1) % 4));  // the "model"
      if (s.n_generated() >= s.max_tokens) sch.remove(s.id);
    }
    // Reference counts are the tables' references; nothing is both free and held.
    std::vector<int32_t> refs(size_t(n_blocks), 0);
    for (uint64_t id : sch.ids())
      for (int32_t b : sch.find(id)->block_table) ++refs[size_t(b)];
    int32_t held = 0;
    for (int32_t b = 0; b < n_blocks; ++b) {
      ok &= refs[size_t(b)] == bm.refs(b);
      held += refs[size_t(b)] > 0;
    }
    ok &= held == bm.n_used() && bm.n_cached() <= n_blocks && bm.n_evictable() <= bm.n_cached();
    ok &= caching || (bm.n_cached() == 0 && sch.prefix_queries() == 0);
    CHECK(ok);
  }
  for (uint64_t id : sch.ids()) sch.remove(id);
  CHECK(bm.n_used() == 0 && bm.n_free() == n_blocks);
  g_hit_tokens += sch.prefix_hit_tokens(), g_evictions += bm.evictions(), g_preemptions += sch.preemptions();
  if (!ok) std::printf("  (randomized seed %llu, caching %d)\n", (unsigned long long)seed, int(caching));
}

}  // namespace

int main() {
  publish_and_share();
  identity_is_the_whole_prefix(~uint64_t(0));
  identity_is_the_whole_prefix(0);  // every key in one bucket: the parent and the tokens decide, not the hash
  lru_eviction();
  duplicate_publication();
  evicted_chain_stops();
  caching_off();
  shared_prompt();
  multi_turn();
  prompt_logprobs_bypass();
  preemption_with_shared_blocks();
  paused_blocks_shared_with_running();
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    randomized(seed, true);
    randomized(seed, false);
    if (seed <= 50) randomized(seed, true, 0);  // every key colliding
  }
  std::printf("randomized: %lld tokens found cached, %lld blocks evicted, %lld preemptions\n", (long long)g_hit_tokens,
              (long long)g_evictions, (long long)g_preemptions);
  CHECK(g_hit_tokens > 0 && g_evictions > 0 && g_preemptions > 0);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
