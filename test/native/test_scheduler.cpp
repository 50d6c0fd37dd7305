// Block manager and scheduler, integers only: block accounting, chunked prefill under a token budget, seat
// limits, preemption when the pool runs dry (and recompute afterwards), and removal freeing blocks.
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

int main() {
  block_manager();
  chunked_prefill();
  seats();
  preemption();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
