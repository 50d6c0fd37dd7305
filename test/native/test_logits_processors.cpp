// Logit bias and the three penalties, each against its published rule written out independently here:
// transformers' RepetitionPenaltyLogitsProcessor (every distinct id in prompt + output: x<0 ? x*p : x/p) and
// OpenAI's presence/frequency penalties (output only: x -= presence*[count>0] + frequency*count).
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "check.h"
#include "logits_processors.h"


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

    std::vector<double> want(logits.begin(), logits.end());
    for (auto &[id, b] : p.logit_bias) want[id] += b;
    std::set<int> seen(tokens.begin(), tokens.end());
    for (int id : seen) want[id] = want[id] < 0 ? want[id] * p.repetition_penalty : want[id] / p.repetition_penalty;
    std::map<int, int> counts;
    for (size_t i = n_prompt; i < tokens.size(); ++i) counts[tokens[i]]++;
    for (auto &[id, c] : counts) want[id] -= p.presence_penalty + p.frequency_penalty * c;

    vt::apply_logits_processors(p, tokens, n_prompt, logits.data(), V, scratch);
    double err = 0;
    for (int v = 0; v < V; ++v) err = std::max(err, std::fabs(double(logits[v]) - want[v]));
    CHECK(err < 1e-5);
  }
  vt::LogitsProcessors off;
  CHECK(!off.active());
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
