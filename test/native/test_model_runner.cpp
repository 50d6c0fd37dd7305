// ModelRunner's choice of where a step's tokens are picked, with a fake model: the device path (Decoder::sample)
// only when the model can, and, when a sampled sequence has logits processors, only when the model also takes
// those (Decoder::applies_processors; then it gets every sampled row's lists); each request's uniform draw made
// exactly as vt::sample makes it (one Rng::uniform() when temperature > 0, none otherwise), so a seeded request
// draws the same numbers on either path; the results shaped as vt::sample's (logprob and top list only when
// asked); and the overlapped decode's choices (chained_steps). The GPU side of the same contract is golden_cuda's
// device-sampling check.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "model_runner.h"

namespace {

constexpr int32_t kVocab = 16, kBlock = 4;

struct FakeDecoder : vt::Decoder {
  bool on_device = true;
  int projected = 0, sampled = 0;
  int32_t last_top_n = -1;
  std::vector<vt::SampleRow> params;

  void forward(const vt::ForwardBatch &) override {}
  void project(const int32_t *, int32_t n, float *logits) override {
    ++projected;
    for (int32_t i = 0; i < n * kVocab; ++i) logits[i] = float(i % kVocab);
  }
  bool samples_on_device() const override { return on_device; }
  bool takes_processors = false;  // applies_processors' answer
  bool lists_given = false;       // whether the last sample() got lists
  vt::ProcessorLists lists;       // a copy of them
  bool processors_on_device() const override { return takes_processors; }
  // The overlapped decode (Decoder::chains): whether it chains, and what each chain_begin got (params copied, or
  // none for a greedy step); chain_end hands out 20 + the read's index for every row.
  bool chaining = true, chaining_sampled = false;
  std::vector<std::vector<vt::SampleRow>> begun;  // per chain_begin: its params (empty: greedy)
  std::vector<int32_t> begun_rows;
  int ended = 0;
  bool chains(int32_t) const override { return chaining; }
  bool chains_sampled() const override { return chaining_sampled; }
  void chain_begin(int32_t n, const vt::SampleRow *p) override {
    begun.emplace_back(p ? std::vector<vt::SampleRow>(p, p + n) : std::vector<vt::SampleRow>{});
    begun_rows.push_back(n);
  }
  void chain_end(int32_t *ids) override {
    for (int32_t i = 0; i < begun_rows[size_t(ended)]; ++i) ids[i] = 20 + ended;
    ++ended;
  }
  bool fits = true;        // applies_processors' answer when it takes processors at all
  mutable int asked = 0;  // applies_processors calls (each after building a step's lists)
  bool applies_processors(const vt::ProcessorLists &) const override { return ++asked, takes_processors && fits; }
  void sample(const int32_t *, int32_t n, const vt::SampleRow *p, int32_t top_n, int32_t *ids, float *lps,
              int32_t *top_ids, float *top_lps, const vt::ProcessorLists *l) override {
    ++sampled;
    last_top_n = top_n;
    params.assign(p, p + n);
    lists_given = l != nullptr;
    if (l) lists = *l;
    for (int32_t i = 0; i < n; ++i) {
      ids[i] = 3 + i, lps[i] = -0.25f * float(i + 1);
      for (int32_t k = 0; k < top_n; ++k) top_ids[i * top_n + k] = 10 - k, top_lps[i * top_n + k] = -float(k + i);
    }
  }
};

// A runner over a fresh fake model (its device switches set first) and the sequences of a step.
struct Rig {
  FakeDecoder *f;
  vt::ModelRunner runner;
  std::vector<std::unique_ptr<vt::Sequence>> seqs;
  explicit Rig(bool on_device = true, bool takes_processors = false)
      : Rig(std::make_unique<FakeDecoder>(), on_device, takes_processors) {}

 private:
  Rig(std::unique_ptr<FakeDecoder> fake, bool on_device, bool takes_processors)
      : f(fake.get()), runner(configured(std::move(fake), on_device, takes_processors), kBlock, kVocab, 16, 4) {}
  static std::unique_ptr<FakeDecoder> configured(std::unique_ptr<FakeDecoder> fake, bool on, bool takes) {
    fake->on_device = on, fake->takes_processors = takes;
    return fake;
  }
};

std::unique_ptr<vt::Sequence> seq(uint64_t id, float temperature, int32_t logprobs, uint64_t seed) {
  auto s = std::make_unique<vt::Sequence>();
  s->id = id;
  s->tokens = {1, 2, 3, 4, 5};  // 4 computed, the 5th is the decode step's input
  s->n_prompt = 4;
  s->n_computed = 4;
  s->block_table = {int32_t(id) * 2, int32_t(id) * 2 + 1};
  s->max_tokens = 8;
  s->sampling.temperature = temperature;
  s->sampling.top_k = 7;
  s->sampling.top_p = 0.9f;
  s->sampling.min_p = 0.05f;
  s->sampling.logprobs = logprobs;
  s->rng = vt::Rng(seed);
  return s;
}

std::vector<vt::ScheduledChunk> decode_plan(const std::vector<std::unique_ptr<vt::Sequence>> &seqs) {
  std::vector<vt::ScheduledChunk> plan;
  for (auto &s : seqs) plan.push_back({s.get(), s->n_computed, 1, true});
  return plan;
}

void device_path() {
  Rig rig;
  rig.seqs.push_back(seq(0, 0.8f, 2, 5));  // sampled, logprobs 2
  rig.seqs.push_back(seq(1, 0.f, 3, 6));   // greedy with logprobs: no draw
  rig.seqs.push_back(seq(2, 1.f, 0, 9));   // sampled, no logprobs
  rig.runner.run(decode_plan(rig.seqs));
  CHECK(rig.runner.has_tokens() && rig.f->sampled == 1 && rig.f->projected == 0);
  CHECK(rig.f->last_top_n == 3);  // the most any row asked for
  CHECK(rig.f->params.size() == 3);
  vt::Rng r5(5), r6(6), r9(9);
  const double u5 = r5.uniform(), u9 = r9.uniform();
  CHECK(rig.f->params[0].u == u5 && rig.f->params[1].u == 0.0 && rig.f->params[2].u == u9);
  CHECK(rig.f->params[0].temperature == 0.8f && rig.f->params[0].top_k == 7 && rig.f->params[0].top_p == 0.9f &&
        rig.f->params[0].min_p == 0.05f);
  // Exactly one draw for the sampled requests, none for the greedy one: their next draws continue the stream.
  CHECK(rig.seqs[0]->rng.uniform() == r5.uniform());
  CHECK(rig.seqs[1]->rng.uniform() == r6.uniform());
  CHECK(rig.seqs[2]->rng.uniform() == r9.uniform());
  // Results as vt::sample shapes them.
  const vt::SampleResult &a = rig.runner.result(0), &b = rig.runner.result(1), &c = rig.runner.result(2);
  CHECK(a.token == 3 && a.n_top == 2 && a.logprob == -0.25f && a.top_ids[0] == 10 && a.top_ids[1] == 9 &&
        a.top_logprobs[1] == -1.f);
  CHECK(b.token == 4 && b.n_top == 3 && b.logprob == -0.5f && b.top_ids[2] == 8 && b.top_logprobs[0] == -1.f);
  CHECK(c.token == 5 && c.n_top == 0 && c.logprob == 0.f);
}

void host_paths() {
  {  // a sequence with logits processors: the step's logits go to the host, nothing drawn
    Rig rig;
    rig.seqs.push_back(seq(0, 0.8f, 0, 5));
    rig.seqs.push_back(seq(1, 0.8f, 0, 6));
    rig.seqs[1]->processors.repetition_penalty = 1.2f;
    rig.runner.run(decode_plan(rig.seqs));
    CHECK(!rig.runner.has_tokens() && rig.f->sampled == 0 && rig.f->projected == 1);
    CHECK(rig.f->asked == 0);  // no lists built for a model that cannot take them
    vt::Rng r5(5);
    CHECK(rig.seqs[0]->rng.uniform() == r5.uniform());  // not drawn by the runner: vt::sample will
  }
  {  // the same on a model that applies processors on the device: sampled there, with every row's lists
    Rig rig(true, true);
    rig.seqs.push_back(seq(0, 0.8f, 0, 5));
    rig.seqs.push_back(seq(1, 0.f, 0, 6));  // greedy with processors: picked on the device after them
    rig.seqs[1]->processors.repetition_penalty = 1.2f;
    rig.seqs[1]->processors.logit_bias = {{7, -1.f}};
    rig.runner.run(decode_plan(rig.seqs));
    CHECK(rig.runner.has_tokens() && rig.f->sampled == 1 && rig.f->projected == 0 && rig.f->lists_given);
    CHECK(rig.f->lists.n_rows() == 2 && rig.f->lists.rows[0].repetition == 1.f && rig.f->lists.rows[1].repetition == 1.2f);
    CHECK(rig.f->lists.seen_offsets == std::vector<int32_t>({0, 0, 5}));  // row 1: ids 1..5 of its tokens
    CHECK(rig.f->lists.bias_offsets == std::vector<int32_t>({0, 0, 1}) && rig.f->lists.bias_ids[0] == 7);
    vt::Rng r5(5), r6(6);
    r5.uniform();
    CHECK(rig.seqs[0]->rng.uniform() == r5.uniform() && rig.seqs[1]->rng.uniform() == r6.uniform());
  }
  {  // lists the model cannot take this step (too large): the host path
    Rig rig(true, true);
    rig.f->fits = false;
    rig.seqs.push_back(seq(0, 0.8f, 0, 5));
    rig.seqs[0]->processors.presence_penalty = 0.5f;
    rig.runner.run(decode_plan(rig.seqs));
    CHECK(!rig.runner.has_tokens() && rig.f->sampled == 0 && rig.f->projected == 1 && rig.f->asked == 1);
  }
  {  // without processors the device gets no lists
    Rig rig(true, true);
    rig.seqs.push_back(seq(0, 0.8f, 0, 5));
    rig.runner.run(decode_plan(rig.seqs));
    CHECK(rig.runner.has_tokens() && rig.f->sampled == 1 && !rig.f->lists_given);
  }
  {  // a model that cannot sample on the device
    Rig rig(false, false);
    rig.seqs.push_back(seq(0, 0.8f, 1, 5));
    rig.runner.run(decode_plan(rig.seqs));
    CHECK(!rig.runner.has_tokens() && rig.f->sampled == 0 && rig.f->projected == 1);
    CHECK(rig.runner.logits(0)[3] == 3.f);
  }
  {  // all greedy without logprobs on a model without a greedy path: the host's argmax, nothing drawn
    Rig rig;
    rig.seqs.push_back(seq(0, 0.f, 0, 5));
    rig.runner.run(decode_plan(rig.seqs));
    CHECK(!rig.runner.has_tokens() && rig.f->sampled == 0 && rig.f->projected == 1);
  }
}

// The overlapped decode's host side (ModelRunner::chainable, launch_chained): which steps chain, and that a chained
// sampled step draws each request's u at launch exactly as the unchained step (run, then Decoder::sample) draws it,
// so seeded requests give the same tokens either way (golden_cuda checks the tokens on the GPU).
void chained_steps() {
  {  // greedy rows chain on any model that chains; the greedy step's pick is the model's argmax (no params)
    Rig rig;
    rig.seqs.push_back(seq(0, 0.f, 0, 5));
    rig.seqs.push_back(seq(1, 0.f, 0, 6));
    const auto plan = decode_plan(rig.seqs);
    CHECK(rig.runner.chainable(plan));
    rig.runner.launch_chained(plan, false);
    CHECK(rig.f->begun.size() == 1 && rig.f->begun[0].empty() && rig.f->begun_rows[0] == 2);
    CHECK(rig.runner.launched() == 1 && rig.runner.collect_chained() == std::vector<int32_t>({20, 20}));
    vt::Rng r5(5);
    CHECK(rig.seqs[0]->rng.uniform() == r5.uniform());  // nothing drawn
    rig.f->chaining = false;
    CHECK(!rig.runner.chainable(plan));
  }
  {  // a sampled row chains only on a model that chains sampled rows; logprobs, processors, prompt logprobs or a
     // chunk of more than one token never do
    Rig rig;
    rig.seqs.push_back(seq(0, 0.f, 0, 5));
    rig.seqs.push_back(seq(1, 0.7f, 0, 6));
    const auto plan = decode_plan(rig.seqs);
    CHECK(!rig.runner.chainable(plan));
    rig.f->chaining_sampled = true;
    CHECK(rig.runner.chainable(plan));
    rig.seqs[1]->sampling.logprobs = 1;
    CHECK(!rig.runner.chainable(plan));
    rig.seqs[1]->sampling.logprobs = 0;
    rig.seqs[0]->processors.presence_penalty = 0.5f;
    CHECK(!rig.runner.chainable(plan));
    rig.seqs[0]->processors.presence_penalty = 0.f;
    rig.seqs[0]->prompt_logprobs = true;
    CHECK(!rig.runner.chainable(plan));
    rig.seqs[0]->prompt_logprobs = false;
    auto two = plan;
    two[0].n_tokens = 2;
    CHECK(!rig.runner.chainable(two) && rig.runner.chainable(plan));
  }
  {  // three sampled steps chained against three unchained: the same params, the same draws, in the same order
    Rig chained, plain;
    for (Rig *r : {&chained, &plain}) {
      r->seqs.push_back(seq(0, 0.7f, 0, 5));
      r->seqs.push_back(seq(1, 0.f, 0, 6));  // greedy in the same step: temperature 0, no draw
      r->seqs.push_back(seq(2, 1.2f, 0, 9));
    }
    chained.f->chaining_sampled = true;
    const auto cplan = decode_plan(chained.seqs), pplan = decode_plan(plain.seqs);
    for (int step = 0; step < 3; ++step) {
      chained.runner.launch_chained(cplan, step > 0);
      if (step > 0) CHECK(chained.runner.collect_chained() == std::vector<int32_t>({19 + step, 19 + step, 19 + step}));
      plain.runner.run(pplan);
      const auto &c = chained.f->begun[size_t(step)], &p = plain.f->params;
      CHECK(c.size() == 3 && p.size() == 3);
      for (size_t i = 0; i < c.size() && i < p.size(); ++i)
        CHECK(c[i].u == p[i].u && c[i].temperature == p[i].temperature && c[i].top_k == p[i].top_k &&
              c[i].top_p == p[i].top_p && c[i].min_p == p[i].min_p);
      CHECK(c.size() == 3 && c[1].u == 0.0 && c[0].u > 0.0 && c[2].u > 0.0);
    }
    vt::Rng r5(5);
    double u5 = 0;
    for (int k = 0; k < 4; ++k) u5 = r5.uniform();
    CHECK(chained.seqs[0]->rng.uniform() == u5);  // three draws, one a step, then this one
  }
}

}  // namespace

int main() {
  device_path();
  host_paths();
  chained_steps();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
