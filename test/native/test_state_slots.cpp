// State slots that grow with demand, integers only (StateSlots::set_growth, take, trim; the scheduler over them):
// the lowest free slot is handed out first, slots come in whole chunks through the backend's resize callback only
// when the one to hand out lies above the mapped ones, a backend that maps fewer makes take() return -1 and the
// mapped count the limit until a trim (no further calls meanwhile), and a trim keeps the held slots. Then the
// scheduler over such slots whose device runs out: requests wait for a slot (or take a paused one's) and every one
// finishes with its tokens, none on a slot outside the mapped ones or on a slot another holds. Last, cuda::slot_layout:
// the padded stride and chunk a growing region lays slots out by (the shapes of Qwen3.5-0.8B and -27B, and a tiny one).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/kv_pool.h"
#include "block_manager.h"
#include "check.h"
#include "scheduler.h"
#include "state_slots.h"

using vt::BlockManager;
using vt::Scheduler;
using vt::Sequence;
using vt::StateSlots;

namespace {

// The backend's side: maps chunk by chunk up to what its memory allows (capacity slots), unmaps on request.
struct FakeDevice {
  int32_t ceiling, chunk, capacity;
  int32_t mapped = 0;
  std::vector<int32_t> calls;  // the slots asked for, in order
  bool args_ok = true;         // every request a whole number of chunks, or the ceiling

  FakeDevice(int32_t ceiling, int32_t chunk, int32_t capacity) : ceiling(ceiling), chunk(chunk), capacity(capacity) {}

  int32_t resize(int32_t slots) {
    calls.push_back(slots);
    args_ok &= (slots % chunk == 0 || slots == ceiling) && slots >= 0 && slots <= ceiling;
    if (slots > mapped) {
      while (mapped < slots) {
        const int32_t next = std::min(ceiling, (mapped / chunk + 1) * chunk);
        if (next > capacity) break;
        mapped = next;
      }
    } else {
      mapped = std::min(ceiling, (slots + chunk - 1) / chunk * chunk);
    }
    return mapped;
  }
  // The load's first chunk, handed to set_growth.
  int32_t load() {
    mapped = std::min(ceiling, chunk);
    return mapped;
  }
  StateSlots::Resize callback() {
    return [this](int32_t slots) { return resize(slots); };
  }
};

std::vector<int32_t> take_n(StateSlots &s, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.take());
  return out;
}

// A fixed set: the lowest free slot first, whatever order slots came back in; -1 once all are held.
void lowest_first() {
  StateSlots s(6);
  CHECK(!s.grows() && s.n_slots() == 6 && s.n_mapped() == 6 && s.n_free() == 6 && s.top() == 0);
  CHECK(take_n(s, 4) == (std::vector<int32_t>{0, 1, 2, 3}) && s.n_held() == 4 && s.top() == 4);
  int32_t three = 3, one = 1;
  s.release(three);
  s.release(one);
  CHECK(three == -1 && one == -1 && s.n_free() == 4 && s.top() == 3);
  CHECK(take_n(s, 5) == (std::vector<int32_t>{1, 3, 4, 5, -1}));
  int32_t none = -1;
  s.release(none);  // (-1: nothing held; nothing changes)
  CHECK(s.n_held() == 6 && s.n_free() == 0 && s.take() == -1);
  CHECK(s.trim(0) == 6 && s.n_mapped() == 6);  // a fixed set ignores trims
}

// Slots come through the callback in whole chunks, only when the slot to hand out lies above the mapped ones.
void growth_in_whole_chunks() {
  FakeDevice dev(10, 4, 100);
  StateSlots s(10);
  s.set_growth(dev.load(), 4, dev.callback());
  CHECK(s.grows() && s.n_slots() == 10 && s.n_mapped() == 4 && s.n_limit() == 10 && s.n_free() == 10);
  CHECK(take_n(s, 4) == (std::vector<int32_t>{0, 1, 2, 3}) && dev.calls.empty());
  CHECK(s.take() == 4 && dev.calls == std::vector<int32_t>{8} && s.n_mapped() == 8);
  CHECK(take_n(s, 3) == (std::vector<int32_t>{5, 6, 7}) && dev.calls.size() == 1);
  // A slot given back below the mapped ones is handed out again before anything is mapped.
  int32_t two = 2;
  s.release(two);
  CHECK(s.take() == 2 && dev.calls.size() == 1);
  CHECK(s.take() == 8 && dev.calls.back() == 10 && s.n_mapped() == 10);  // the last chunk ends at the ceiling
  CHECK(s.take() == 9 && s.take() == -1 && dev.calls.size() == 2 && s.n_free() == 0);
  CHECK(dev.args_ok && s.top() == 10);
}

// A backend that maps fewer than asked: take() gets -1, the mapped count is the limit and the device is not asked
// again until a trim; slots given back below it are handed out meanwhile.
void backend_comes_short() {
  FakeDevice dev(16, 4, 8);  // memory for one chunk more than the load's: 8 slots; the ceiling says 16
  StateSlots s(16);
  s.set_growth(dev.load(), 4, dev.callback());
  std::vector<int32_t> held = take_n(s, 8);
  CHECK(held == (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}) && dev.calls == std::vector<int32_t>{8});
  CHECK(s.take() == -1 && dev.calls == (std::vector<int32_t>{8, 12}));
  CHECK(s.n_mapped() == 8 && s.n_limit() == 8 && s.n_free() == 0);
  CHECK(s.take() == -1 && dev.calls.size() == 2);  // the limit stands: no call
  s.release(held[5]);
  CHECK(s.n_free() == 1 && s.take() == 5 && dev.calls.size() == 2);
  // Part of a chunk's worth: a device with room for 10 slots in chunks of 2 maps 10 of the 12 asked for.
  FakeDevice two(16, 2, 10);
  StateSlots t(16);
  t.set_growth(two.load(), 2, two.callback());
  std::vector<int32_t> got = take_n(t, 11);
  CHECK(got.back() == -1 && t.n_mapped() == 10 && t.n_limit() == 10 && t.n_held() == 10);
  // Memory comes back: a trim (nothing to give back here: every slot is held) lifts the limit, and the next take()
  // asks the device again.
  dev.capacity = 16;
  CHECK(s.trim(4) == 8 && s.n_limit() == 16 && s.n_free() == 8);
  CHECK(s.take() == 8 && s.n_mapped() == 12 && dev.calls.back() == 12);
  CHECK(dev.args_ok && two.args_ok);
}

// A trim keeps the first max(keep, 1 + the highest held slot) in whole chunks, and gives the rest back.
void trim_keeps_held() {
  FakeDevice dev(24, 4, 100);
  StateSlots s(24);
  s.set_growth(dev.load(), 4, dev.callback());
  std::vector<int32_t> held = take_n(s, 22);
  CHECK(s.n_mapped() == 24 && held.back() == 21);
  for (int32_t &x : held)
    if (x != 9 && x != 2) s.release(x);
  CHECK(s.n_held() == 2 && s.top() == 10);
  CHECK(s.trim(4) == 12 && dev.mapped == 12 && dev.calls.back() == 12);  // slot 9 held: its chunk stays
  const size_t calls = dev.calls.size();
  CHECK(s.trim(4) == 12 && dev.calls.size() == calls);  // nothing to give back: no call
  s.release(held[9]);
  CHECK(s.top() == 3 && s.trim(4) == 4 && dev.mapped == 4 && s.n_mapped() == 4);
  CHECK(s.trim(6) == 4);  // a keep above what is mapped maps nothing
  // The lowest free slot after the trim is below the mapped ones; the next above them grows again.
  CHECK(take_n(s, 4) == (std::vector<int32_t>{0, 1, 3, 4}) && s.n_mapped() == 8);
  s.release(held[2]);
  CHECK(s.trim(0) == 8 && dev.args_ok);  // slot 4 is held: its chunk stays
}

std::unique_ptr<Sequence> seq(uint64_t id, int32_t prompt, int32_t max_tokens) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  for (int32_t i = 0; i < prompt; ++i) s->tokens.push_back(int32_t((id * 31 + uint64_t(i) * 7) % 97));
  s->n_prompt = prompt;
  s->max_tokens = max_tokens;
  return s;
}

// The scheduler over slots whose device runs out part-way (memory for 3 of 8 slots, KV blocks plenty): requests
// wait for a slot while 3 run, take them as others finish, and every one finishes with all its tokens; no slot is
// held by two sequences at once or lies outside the mapped ones. A paused sequence's slot is taken back for a waiting
// one when no other can be mapped, and it finishes too once allowed to go on.
void scheduler_when_slots_run_out() {
  FakeDevice dev(8, 1, 3);
  StateSlots slots(8);
  slots.set_growth(dev.load(), 1, dev.callback());
  BlockManager bm(1000, 4);
  Scheduler sch({8, 64}, bm, &slots);
  const int32_t n = 10;
  for (uint64_t id = 1; id <= uint64_t(n); ++id) {
    auto s = seq(id, 5 + int32_t(id) % 7, 12 + int32_t(id) % 5);
    if (id == 2) s->allowed_tokens = 3;  // pauses after 3 tokens, holding its slot
    sch.add(std::move(s));
  }
  int32_t finished = 0, steps = 0, most_waiting_with_seats = 0;
  bool ok = true, allowed = false;
  Sequence *paused = nullptr;
  while (finished < n && steps < 1000) {
    ++steps;
    auto plan = sch.schedule();
    if (plan.empty()) {
      // Nothing runs: only the paused one is left, waiting for its consumer.
      ok &= sch.n_waiting() == 0 && sch.n_running() == 0 && sch.n_paused() == 1 && !allowed;
      if (paused) paused->allowed_tokens = -1;
      allowed = true;
      continue;
    }
    std::set<int32_t> seen;
    for (const auto &c : plan) {
      const int32_t sl = c.seq->state_slot;
      ok &= sl >= 0 && sl < slots.n_mapped() && seen.insert(sl).second;
    }
    if (sch.n_waiting() > 0) most_waiting_with_seats = std::max(most_waiting_with_seats, sch.n_waiting());
    sch.commit(plan);
    for (const auto &c : plan) {
      if (!c.sample) continue;
      c.seq->tokens.push_back(1);
      if (c.seq->id == 2) paused = c.seq;
      if (c.seq->n_generated() >= c.seq->max_tokens) {
        ok &= sch.remove(c.seq->id) != nullptr;
        if (c.seq == paused) paused = nullptr;
        ++finished;
      }
    }
    // Once the others have taken its slot back, its consumer lets it go on.
    if (paused && !allowed && sch.n_paused() == 1 && !paused->holds_state()) {
      paused->allowed_tokens = -1;
      allowed = true;
    }
  }
  std::printf("slots run out: %d requests in %d steps, at most %d waiting for a slot, %lld preemptions\n", finished,
              steps, most_waiting_with_seats, (long long)sch.preemptions());
  CHECK(ok && finished == n && sch.idle());
  CHECK(slots.n_mapped() == 3 && slots.n_limit() == 3 && slots.n_held() == 0);
  CHECK(most_waiting_with_seats > 0 && sch.preemptions() >= 1);  // waited with seats free; the paused one's taken
  CHECK(dev.args_ok && dev.calls == (std::vector<int32_t>{2, 3, 4}));  // the third came short, then the limit held
  // Memory back and a trim: the device is asked again and more run at once.
  dev.capacity = 8;
  CHECK(slots.trim(1) == 1 && slots.n_limit() == 8);
  for (uint64_t id = 100; id < 106; ++id) sch.add(seq(id, 4, 3));
  CHECK(sch.schedule().size() == 6 && slots.n_mapped() == 6 && slots.n_held() == 6);
}

// The most a layout maps beyond the slots held, over every count held from 1 to n (brute force).
int64_t worst_waste(int64_t slot, int32_t n, const vt::cuda::SlotLayout &l) {
  int64_t worst = 0;
  for (int64_t k = 1; k <= n; ++k) worst = std::max(worst, (k + l.chunk - 1) / l.chunk * l.chunk * l.stride - k * slot);
  return worst;
}

// The layout of a growing region: a stride of whole floats, at least the slot, chunks of whole granules, and no
// power-of-two padding (nor none) that would waste less at its worst. The shapes of Qwen3.5: -0.8B's slot (18 Gated
// DeltaNet layers) is 20,201,472 bytes, 2^14 x 1233, whose unpadded chunk is 128 slots (2.6 GB); -27B's (48 layers)
// 156,893,184, 2^17 x 1197: 16 slots (2.5 GB).
void layouts() {
  const int64_t g = int64_t(2) << 20;
  struct Case {
    int64_t slot;
    int32_t n;
  };
  const Case cases[] = {{20201472, 16},   {20201472, 256}, {20201472, 4096}, {156893184, 256}, {156893184, 1},
                        {31488, 256},     {10240, 4},      {4, 1},           {int64_t(4) << 20, 7}};
  for (const Case &c : cases) {
    const vt::cuda::SlotLayout l = vt::cuda::slot_layout(c.slot, c.n, g);
    const std::string what = std::to_string(c.slot) + " x " + std::to_string(c.n);
    record(l.stride >= c.slot && l.stride % 4 == 0 && l.chunk >= 1 && (int64_t(l.chunk) * l.stride) % g == 0,
           what + ": a stride of whole floats, chunks of whole granules");
    record(l.chunk == vt::cuda::kv_chunk_blocks(l.stride, g), what + ": the fewest slots of whole granules");
    const int64_t waste = worst_waste(c.slot, c.n, l);
    for (int64_t a = 4; a <= g; a *= 2) {
      vt::cuda::SlotLayout other;
      other.stride = (c.slot + a - 1) / a * a;
      other.chunk = vt::cuda::kv_chunk_blocks(other.stride, g);
      record(waste <= worst_waste(c.slot, c.n, other), what + ": wastes no more than padding to " + std::to_string(a));
    }
    std::printf("slot %lld bytes, %d slots: stride %lld, %d a chunk (%.1f MiB), at worst %.1f MiB mapped unheld\n",
                (long long)c.slot, c.n, (long long)l.stride, l.chunk, double(int64_t(l.chunk) * l.stride) / (1 << 20),
                double(waste) / (1 << 20));
  }
  // The models' shapes at a few seats: one slot a chunk, each padded to whole granules.
  const vt::cuda::SlotLayout small = vt::cuda::slot_layout(20201472, 16, g);
  CHECK(small.stride == 10 * g && small.chunk == 1);
  const vt::cuda::SlotLayout big = vt::cuda::slot_layout(156893184, 256, g);
  CHECK(big.stride == 75 * g && big.chunk == 1);
  // A slot of whole granules is not padded; a tiny one shares a granule with others.
  CHECK(vt::cuda::slot_layout(int64_t(4) << 20, 7, g).stride == int64_t(4) << 20);
  const vt::cuda::SlotLayout tiny = vt::cuda::slot_layout(10240, 4, g);
  CHECK(tiny.stride == 16384 && tiny.chunk == 128);
}

}  // namespace

int main() {
  lowest_first();
  growth_in_whole_chunks();
  backend_comes_short();
  trim_keeps_held();
  scheduler_when_slots_run_out();
  layouts();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
