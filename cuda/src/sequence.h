// One request as the engine sees it: its tokens (prompt, then what it generated), how many of them already
// have KV in the cache, its block table, its sampling state and how far its consumer lets it run ahead.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "block_manager.h"
#include "logits_processors.h"
#include "sampling.h"

namespace vt {

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;       // prompt + generated
  int32_t n_prompt = 0;
  int32_t n_computed = 0;            // tokens[0, n_computed) have K/V in the cache
  std::vector<int32_t> block_table;  // the blocks it holds, in position order (its first ones may be shared, read-only)
  int32_t state_slot = -1;           // its state slot (StateSlots), for models whose layers keep one; -1: none
  PrefixChain prefix;                // how far its full blocks are identified in the prefix cache (BlockManager)
  int32_t max_tokens = 0;
  std::vector<int32_t> stop_ids;
  SamplingParams sampling;
  LogitsProcessors processors;
  Rng rng;
  bool prompt_logprobs = false;     // teacher forcing: report logprobs of prompt tokens 1 .. n_prompt-1
  int32_t prompt_logprobs_done = 1; // next prompt index to report (survives preemption, so none is sent twice)
  // Backpressure (vt_engine_allow_tokens): the most tokens it may generate in all before it pauses until its
  // consumer allows more; -1 = no limit. Set on the step thread only.
  int32_t allowed_tokens = -1;

  int32_t n_generated() const { return int32_t(tokens.size()) - n_prompt; }
  int32_t n_pending() const { return int32_t(tokens.size()) - n_computed; }  // tokens still to run
  // Whether its consumer lets it generate n more tokens (a chained step asks for 2: the one in flight, the next).
  bool allows(int32_t n) const { return allowed_tokens < 0 || int64_t(n_generated()) + n <= allowed_tokens; }
  bool paused() const { return !allows(1); }  // generated all it was allowed: it waits for its consumer
  // It holds the state of its computed tokens (KV blocks, a state slot): it can go on from them.
  bool holds_state() const { return !block_table.empty() || state_slot >= 0; }
};

}  // namespace vt
