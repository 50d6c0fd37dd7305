// Block manager and scheduler, integers only: block accounting, chunked prefill under a token budget, seat
// limits, preemption when the pool runs dry (and recompute afterwards), removal freeing blocks, and backpressure
// (a sequence that generated all it was allowed pauses: no seat, its KV kept, the first taken back when short).
#include <cstdio>
#include <memory>
#include <string>

#include "check.h"
#include "block_manager.h"
#include "scheduler.h"


static std::unique_ptr<vt::Sequence> seq(uint64_t id, int prompt) {
  auto s = std::make_unique<vt::Sequence>();
  s->id = id;
  s->tokens.assign(prompt, 7);
  s->n_prompt = prompt;
  s->max_tokens = 1000;
  return s;
}

// Runs a plan as the engine would: commit it, then append a token to every sequence that sampled.
static void run(vt::Scheduler &sch, const std::vector<vt::ScheduledChunk> &plan) {
  sch.commit(plan);
  for (auto &c : plan)
    if (c.sample) c.seq->tokens.push_back(1);
}

static void block_manager() {
  vt::BlockManager bm(10, 4);
  std::vector<int32_t> a, b;
  CHECK(bm.grow(a, 9) && a.size() == 3 && bm.n_used() == 3);
  CHECK(bm.grow(a, 12) && a.size() == 3);  // still fits in 3 blocks
  CHECK(bm.grow(a, 13) && a.size() == 4);
  CHECK(!bm.grow(b, 28) && b.empty() && bm.n_used() == 4);  // needs 7, 6 free: all or nothing
  CHECK(bm.grow(b, 24) && b.size() == 6 && bm.n_free() == 0);
  bm.release(a);
  CHECK(a.empty() && bm.n_free() == 4);
  std::vector<int32_t> c;
  CHECK(bm.grow(c, 16) && c.size() == 4);
  bool disjoint = true;  // no block handed out twice
  for (int x : c)
    for (int y : b) disjoint &= x != y;
  CHECK(disjoint);
}

static void chunked_prefill() {
  vt::BlockManager bm(100, 16);
  vt::Scheduler sch({8, 64}, bm);
  sch.add(seq(1, 150));
  sch.add(seq(2, 5));
  auto p1 = sch.schedule();  // budget 64: 64 tokens of seq 1, nothing left for seq 2
  CHECK(p1.size() == 1 && p1[0].n_tokens == 64 && !p1[0].sample);
  run(sch, p1);
  auto p2 = sch.schedule();
  CHECK(p2.size() == 1 && p2[0].pos0 == 64 && p2[0].n_tokens == 64);
  run(sch, p2);
  auto p3 = sch.schedule();  // 22 left of seq 1 (samples), then seq 2 admitted whole
  CHECK(p3.size() == 2 && p3[0].n_tokens == 22 && p3[0].sample && p3[1].seq->id == 2 && p3[1].n_tokens == 5 && p3[1].sample);
  run(sch, p3);
  auto p4 = sch.schedule();  // both decode
  CHECK(p4.size() == 2 && p4[0].n_tokens == 1 && p4[1].n_tokens == 1 && p4[0].pos0 == 150 && p4[1].pos0 == 5);
  CHECK(bm.n_used() == bm.blocks_for(151) + bm.blocks_for(6));
  sch.remove(1);
  sch.remove(2);
  CHECK(bm.n_used() == 0 && sch.idle());
}

static void seats() {
  vt::BlockManager bm(100, 16);
  vt::Scheduler sch({2, 512}, bm);
  for (int i = 1; i <= 3; ++i) sch.add(seq(i, 4));
  auto p = sch.schedule();
  CHECK(p.size() == 2 && sch.n_waiting() == 1 && sch.n_running() == 2);
}

static void preemption() {
  vt::BlockManager bm(4, 4);  // 16 tokens in all
  vt::Scheduler sch({8, 512}, bm);
  sch.add(seq(1, 7));  // 2 blocks
  sch.add(seq(2, 7));  // 2 blocks
  auto p = sch.schedule();
  CHECK(p.size() == 2 && bm.n_free() == 0);
  run(sch, p);  // both now 8 tokens, 7 computed
  p = sch.schedule();  // decodes at position 7 still fit in the 2nd block
  CHECK(p.size() == 2);
  run(sch, p);  // 9 tokens, 8 computed: the next decode (pos 8) needs a 3rd block each; none free
  p = sch.schedule();
  // seq 2 (newest) is preempted so seq 1 can grow; seq 2 waits with its tokens kept.
  CHECK(p.size() == 1 && p[0].seq->id == 1 && sch.preemptions() == 1 && sch.n_waiting() == 1);
  run(sch, p);
  sch.remove(1);
  p = sch.schedule();  // seq 2 is recomputed from scratch: its prompt and the 2 tokens it generated
  CHECK(p.size() == 1 && p[0].seq->id == 2 && p[0].pos0 == 0 && p[0].n_tokens == 9 && p[0].sample);
}

static bool planned(const std::vector<vt::ScheduledChunk> &plan, uint64_t id) {
  for (const auto &c : plan)
    if (c.seq->id == id) return true;
  return false;
}

// A paused sequence gives up its seat at once (a waiting one takes it) but keeps its blocks, and goes on from where
// it stopped, without recompute, once allowed more and a seat is free.
static void pause_gives_seat_keeps_kv() {
  vt::BlockManager bm(100, 16);
  vt::Scheduler sch({2, 512}, bm);
  for (int i = 1; i <= 3; ++i) sch.add(seq(i, 5));
  auto p = sch.schedule();
  CHECK(p.size() == 2 && planned(p, 1) && planned(p, 2));
  vt::Sequence *one = p[0].seq;
  one->allowed_tokens = 2;
  run(sch, p);  // 1 generated each
  p = sch.schedule();
  CHECK(p.size() == 2 && planned(p, 1));
  run(sch, p);  // seq 1 has generated its 2
  p = sch.schedule();
  CHECK(p.size() == 2 && !planned(p, 1) && planned(p, 2) && planned(p, 3));
  CHECK(sch.n_paused() == 1 && sch.n_running() == 2 && sch.n_waiting() == 0 && !sch.wants_in());
  CHECK(one->n_computed == 6 && one->block_table.size() == 1 && bm.n_used() == 3);
  run(sch, p);
  CHECK(sch.find(1) == one && sch.ids().size() == 3 && sch.active_ids().size() == 2);
  one->allowed_tokens = 3;  // allowed one more, but both seats are taken: it waits with its KV
  CHECK(sch.wants_in() && !sch.idle());
  p = sch.schedule();
  CHECK(p.size() == 2 && !planned(p, 1) && sch.n_paused() == 1 && one->block_table.size() == 1);
  run(sch, p);
  sch.remove(2);
  p = sch.schedule();  // a seat: it decodes its next token where it stopped
  CHECK(p.size() == 2 && planned(p, 1) && sch.n_paused() == 0);
  for (const auto &c : p)
    if (c.seq == one) CHECK(c.pos0 == 6 && c.n_tokens == 1 && c.sample);
  run(sch, p);  // seq 1 has its 3
  sch.remove(3);
  p = sch.schedule();
  CHECK(p.empty() && sch.n_paused() == 1 && sch.idle() && sch.active_ids().empty() && sch.ids().size() == 1);
  CHECK(one->n_generated() == 3 && bm.n_used() == 1);
  sch.remove(1);
  CHECK(bm.n_used() == 0 && sch.idle() && sch.n_paused() == 0);
}

// A request allowed nothing is never admitted, and the scheduler is idle while it is the only one.
static void pause_before_admission() {
  vt::BlockManager bm(100, 16);
  vt::Scheduler sch({8, 512}, bm);
  auto s = seq(1, 5);
  s->allowed_tokens = 0;
  sch.add(std::move(s));
  auto p = sch.schedule();
  CHECK(p.empty() && sch.n_paused() == 1 && sch.n_waiting() == 0 && sch.idle() && bm.n_used() == 0);
  sch.find(1)->allowed_tokens = -1;
  CHECK(!sch.idle() && sch.wants_in());
  p = sch.schedule();  // no KV to go on from: it is admitted from the queue with its whole prompt
  CHECK(p.size() == 1 && p[0].pos0 == 0 && p[0].n_tokens == 5 && p[0].sample && sch.n_paused() == 0);
}

// When the pool runs dry a paused sequence's blocks go first, before any running sequence is preempted; it is then
// recomputed when it goes on.
static void paused_blocks_taken_first() {
  vt::BlockManager bm(4, 4);  // 16 tokens in all
  vt::Scheduler sch({8, 512}, bm);
  sch.add(seq(1, 7));
  sch.add(seq(2, 7));
  auto p = sch.schedule();
  CHECK(p.size() == 2 && bm.n_free() == 0);
  p[1].seq->allowed_tokens = 1;
  vt::Sequence *two = p[1].seq;
  run(sch, p);  // 8 tokens each, 7 computed; seq 2 has generated its 1
  p = sch.schedule();
  CHECK(p.size() == 1 && p[0].seq->id == 1 && sch.n_paused() == 1);
  run(sch, p);  // seq 1: 9 tokens, 8 computed: its next decode needs a 3rd block, and none is free
  p = sch.schedule();
  CHECK(p.size() == 1 && p[0].seq->id == 1 && sch.n_running() == 1 && sch.preemptions() == 1);
  CHECK(two->block_table.empty() && two->n_computed == 0 && sch.n_paused() == 1);
  run(sch, p);
  two->allowed_tokens = -1;
  sch.remove(1);
  p = sch.schedule();  // recomputed: its prompt and the token it generated
  CHECK(p.size() == 1 && p[0].seq == two && p[0].pos0 == 0 && p[0].n_tokens == 8 && p[0].sample);
}

// A waiting sequence takes a paused one's blocks only when that makes it fit; otherwise the paused one keeps them.
static void admission_takes_paused_blocks_only_if_enough() {
  vt::BlockManager bm(4, 4);
  vt::Scheduler sch({8, 512}, bm);
  auto a = seq(1, 7);  // 2 blocks, runs on
  auto b = seq(2, 3);  // 1 block, then paused
  b->allowed_tokens = 1;
  sch.add(std::move(a));
  sch.add(std::move(b));
  auto p = sch.schedule();
  CHECK(p.size() == 2 && bm.n_free() == 1);
  vt::Sequence *paused = p[1].seq;
  run(sch, p);
  sch.add(seq(3, 9));  // needs 3 blocks: 1 free + 1 paused is not enough
  p = sch.schedule();
  CHECK(p.size() == 1 && p[0].seq->id == 1 && sch.n_waiting() == 1 && paused->block_table.size() == 1);
  CHECK(sch.preemptions() == 0);
  run(sch, p);
  sch.remove(1);  // now 3 free + 1 paused: 3 are free already, the paused one keeps its block
  p = sch.schedule();
  CHECK(p.size() == 1 && p[0].seq->id == 3 && paused->block_table.size() == 1 && bm.n_free() == 0);
  sch.add(seq(4, 2));  // 1 block: only the paused one's
  run(sch, p);
  sch.remove(3);
  sch.add(seq(5, 15));  // 4 blocks: the 3 just freed and the paused one's
  p = sch.schedule();
  CHECK(planned(p, 4) && planned(p, 5) == false);  // seq 4 fits in the free blocks first, in arrival order
  run(sch, p);
  sch.remove(4);
  p = sch.schedule();  // 3 free + the paused one's 1 = 4: taken back
  CHECK(p.size() == 1 && p[0].seq->id == 5 && paused->block_table.empty() && sch.preemptions() == 1);
}

int main() {
  block_manager();
  chunked_prefill();
  seats();
  preemption();
  pause_gives_seat_keeps_kv();
  pause_before_admission();
  paused_blocks_taken_first();
  admission_takes_paused_blocks_only_if_enough();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
