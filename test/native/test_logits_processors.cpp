// Logit bias and the three penalties, each against its published rule written out independently here:
// transformers' RepetitionPenaltyLogitsProcessor (every distinct id in prompt + output: x<0 ? x*p : x/p) and
// OpenAI's presence/frequency penalties (output only: x -= presence*[count>0] + frequency*count); and the lists
// the GPU applies them from (ProcessorLists) against the same rules.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "check.h"
#include "logits_processors.h"

// The processors' published rules, in double.
std::vector<double> published(const vt::LogitsProcessors &p, const std::vector<int32_t> &tokens, int n_prompt,
                              const std::vector<float> &logits) {
  std::vector<double> want(logits.begin(), logits.end());
  for (auto &[id, b] : p.logit_bias) want[id] += b;
  std::set<int> seen(tokens.begin(), tokens.end());
  for (int id : seen) want[id] = want[id] < 0 ? want[id] * p.repetition_penalty : want[id] / p.repetition_penalty;
  std::map<int, int> counts;
  for (size_t i = n_prompt; i < tokens.size(); ++i) counts[tokens[i]]++;
  for (auto &[id, c] : counts) want[id] -= p.presence_penalty + p.frequency_penalty * c;
  return want;
}

int main() {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::uniform_int_distribution<int> tok(0, 49);
  const int V = 50;
  std::vector<int32_t> scratch;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(V);
    for (auto &x : logits) x = nd(gen);
    const int n_prompt = 1 + trial % 7;
    std::vector<int32_t> tokens;
    for (int i = 0; i < n_prompt + trial % 11; ++i) tokens.push_back(tok(gen));
    vt::LogitsProcessors p;
    p.repetition_penalty = trial % 3 == 0 ? 1.f : 1.3f;
    p.presence_penalty = trial % 2 ? 0.5f : 0.f;
    p.frequency_penalty = trial % 5 ? 0.25f : 0.f;
    p.logit_bias = {{tok(gen), 2.f}, {tok(gen), -1.5f}};

    const std::vector<double> want = published(p, tokens, n_prompt, logits);
    vt::apply_logits_processors(p, tokens, n_prompt, logits.data(), V, scratch);
    double err = 0;
    for (int v = 0; v < V; ++v) err = std::max(err, std::fabs(double(logits[v]) - want[v]));
    CHECK(err < 1e-5);
  }
  vt::LogitsProcessors off;
  CHECK(!off.active());

  // ProcessorLists (the GPU's form): the lists applied by their documented rules (penalties.cuh) give what the
  // published rules above give, row by row in one set of lists; a row without a repetition penalty lists only
  // its output's ids, one without penalties none.
  for (int trial = 0; trial < 50; ++trial) {
    vt::ProcessorLists lists;
    std::vector<std::vector<double>> wants;
    std::vector<std::vector<float>> rows;
    for (int r = 0; r < 4; ++r) {
      std::vector<float> logits(V);
      for (auto &x : logits) x = nd(gen);
      const int n_prompt = 1 + (trial + r) % 9;
      std::vector<int32_t> tokens;
      for (int i = 0; i < n_prompt + (trial * 3 + r) % 13; ++i) tokens.push_back(tok(gen));
      vt::LogitsProcessors p;
      p.repetition_penalty = r == 1 || r == 3 ? 1.f : 0.8f;
      p.presence_penalty = r == 3 ? 0.f : 0.4f;
      p.frequency_penalty = r == 3 ? 0.f : 0.1f * float(r);
      if (r != 2) p.logit_bias = {{tok(gen), 1.f}, {tok(gen), -2.f}};
      if (r == 0) p.logit_bias.push_back(p.logit_bias[0]);  // the same id twice
      lists.add(p, tokens, n_prompt, V);
      const std::set<int> seen(tokens.begin(), tokens.end()), output(tokens.begin() + n_prompt, tokens.end());
      const size_t listed = size_t(lists.seen_offsets[r + 1] - lists.seen_offsets[r]);
      CHECK(listed == (p.repetition_penalty != 1.f ? seen.size() : r == 3 ? 0 : output.size()));
      wants.push_back(published(p, tokens, n_prompt, logits));
      rows.push_back(logits);
    }
    CHECK(lists.n_rows() == 4 && lists.seen_counts.size() == lists.seen_ids.size());
    for (int r = 0; r < 4; ++r) {  // penalties.cuh's rules
      std::vector<float> &x = rows[r];
      for (int j = lists.bias_offsets[r]; j < lists.bias_offsets[r + 1]; ++j) x[lists.bias_ids[j]] += lists.bias_values[j];
      const vt::PenaltyRow pr = lists.rows[r];
      for (int j = lists.seen_offsets[r]; j < lists.seen_offsets[r + 1]; ++j) {
        float &v = x[lists.seen_ids[j]];
        if (pr.repetition != 1.f) v = v < 0 ? v * pr.repetition : v / pr.repetition;
        if (lists.seen_counts[j] > 0) v -= pr.presence + pr.frequency * float(lists.seen_counts[j]);
      }
      double err = 0;
      for (int v = 0; v < V; ++v) err = std::max(err, std::fabs(double(x[v]) - wants[r][v]));
      CHECK(err < 1e-5);
    }
    CHECK(lists.upload_bytes(0, 4) >= lists.rows.size() * sizeof(vt::PenaltyRow) + 8 * lists.seen_ids.size());
    {  // rows 1..2 packed: offsets rebased to the first, its ids and biases where at[] says
      size_t at[7];
      std::vector<uint8_t> buf(lists.upload_bytes(1, 2));
      CHECK(lists.pack(1, 2, buf.data(), at) == buf.size());
      int32_t so[3], bo[3];
      std::memcpy(so, buf.data() + at[1], sizeof so);
      std::memcpy(bo, buf.data() + at[4], sizeof bo);
      CHECK(so[0] == 0 && so[2] == lists.seen_offsets[3] - lists.seen_offsets[1]);
      CHECK(bo[0] == 0 && bo[2] == lists.bias_offsets[3] - lists.bias_offsets[1]);
      if (so[2] > 0) {
        int32_t id;
        std::memcpy(&id, buf.data() + at[2], 4);
        CHECK(id == lists.seen_ids[size_t(lists.seen_offsets[1])]);
      }
      for (int part = 0; part < 7; ++part) CHECK(at[part] % 16 == 0);
    }
    lists.clear();
    CHECK(lists.n_rows() == 0 && lists.seen_offsets.size() == 1 && lists.bias_offsets.size() == 1);
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
