// What the model runner needs of a model, whatever backend runs it: one forward over a flattened batch (which
// also writes the batch's keys and values into that backend's paged KV cache), then fp32 logits of chosen rows
// in host memory. backend/cpu/cpu_decoder (CPU) and backend/cuda/cuda_decoder (GPU) implement it.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "sample_rows.h"
#include "logits_processors.h"

namespace vt {

// One step's flattened batch: T tokens from several sequences, each a contiguous run of rows. Host memory.
struct ForwardBatch {
  int32_t n_tokens = 0;
  const int32_t *tokens = nullptr;     // (T)
  const int32_t *positions = nullptr;  // (T)
  const int32_t *slots = nullptr;      // (T) KV cache slot of each token: block * block_size + offset
  cpu::AttentionBatch attn{};
  // (attn.n_seqs) each sequence's state slot (StateSlots; -1 for models without), for the layers that keep one
  // (models/state_layout.h). A sequence whose chunk starts at position 0 starts from a zero state: its slot holds
  // whatever its previous holder left.
  const int32_t *state_slots = nullptr;
  // The tokens are the greedy picks of the previous forward, row for row, where the model keeps them (an overlapped
  // decode step: Decoder::chains); `tokens` is not read then.
  bool tokens_from_picks = false;
};

// What a backend says of itself in the engine's memory report (vt_engine_memory): its device, from the driver at the
// time of asking (device < 0: none, as on the CPU backend), and the decode graphs it holds (they may be captured
// after the load, at first use).
struct BackendReport {
  int32_t device = -1;
  int64_t total_bytes = -1, free_bytes = -1;
  bool unified_memory = false;
  std::string name;
  int32_t graphs = 0;
  int64_t graph_bytes = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual BackendReport report() const { return {}; }
  // Runs every layer; afterwards the final-normed hidden state of each row is ready for project().
  virtual void forward(const ForwardBatch &b) = 0;
  // logits (n, vocab) fp32, host memory, of the given rows of the last forward().
  virtual void project(const int32_t *rows, int32_t n, float *logits) = 0;
  // The greedy token (argmax, ties to the lowest id) of each given row, computed where the logits are, so
  // they never travel; false when this backend has no such path (the caller then uses project()).
  virtual bool greedy(const int32_t * /*rows*/, int32_t /*n*/, int32_t * /*ids*/) { return false; }
  // The overlapped decode (Engine::step): the next decode step of the same rows is launched while the picks of the
  // one before are still being read, its tokens taken from those picks where they are (tokens_from_picks), so the
  // device does not wait for the host between steps. chains(n): whether this backend can, for a decode step of n
  // rows (one a sequence, every one plain greedy); chains_sampled(): also when rows are sampled (no logprobs, no
  // logits processors) by sample()'s rules. For such a step forward() may return before the step has run,
  // chain_begin(n, params) picks the tokens of its rows 0 .. n - 1 (params null: the greedy argmax; else row i
  // sampled with params[i], as sample() would) and starts reading them, and chain_end(ids) waits for the oldest
  // begun read and writes its picks (first in, first out; at most two begun and not ended).
  virtual bool chains(int32_t /*n*/) const { return false; }
  virtual bool chains_sampled() const { return false; }
  virtual void chain_begin(int32_t /*n*/, const SampleRow * /*params*/) {}
  virtual void chain_end(int32_t * /*ids*/) {}
  // Sampling where the logits are, for rows without logits processors: whether this backend can (false: the
  // caller uses project() and vt::sample), and the call. Row i of `rows` is sampled by vt::sample's rules
  // (sampling.h) with params[i] and the uniform draw params[i].u the host made from the request's Rng exactly
  // as vt::sample would (only when temperature > 0); → ids[i], logprobs[i] (the token's log-softmax of the raw
  // logits) and, when top_n > 0, the top_n largest per row (top_ids/top_lps, (n, top_n), as SampleResult's).
  virtual bool samples_on_device() const { return false; }
  // lists (row i of them for row i; nullptr: none): the rows' logits processors, applied to their logits before
  // sampling, as apply_logits_processors would on the host (so logprobs are of the processed logits, as there);
  // only given when applies_processors(lists) said yes.
  virtual void sample(const int32_t * /*rows*/, int32_t /*n*/, const SampleRow * /*params*/, int32_t /*top_n*/,
                      int32_t * /*ids*/, float * /*logprobs*/, int32_t * /*top_ids*/, float * /*top_lps*/,
                      const ProcessorLists * /*lists*/ = nullptr) {}
  // Whether this backend can apply logits processors at all (when not, the caller does not build the lists),
  // and whether sample() can take these lists this step (false: the caller sends the logits to the host).
  virtual bool processors_on_device() const { return false; }
  virtual bool applies_processors(const ProcessorLists & /*lists*/) const { return false; }

  // The KV pool's memory, for a backend that maps it in chunks as blocks are needed (the CUDA decoder's KvPool; the
  // engine's BlockManager asks through these, on the step thread only). The defaults are a fixed pool, every
  // block usable from the start (the CPU backend: its pool is a lazily committed anonymous mapping already).
  // kv_chunk_blocks(): blocks per chunk; 0: the pool is fixed.
  virtual int32_t kv_chunk_blocks() const { return 0; }
  // Blocks usable now; -1: as many as the plan's n_blocks (a fixed pool of the planned size).
  virtual int32_t kv_mapped_blocks() const { return -1; }
  // Maps chunks until the first `blocks` blocks are usable (whole chunks, the last one possibly ending at the
  // ceiling); returns the blocks usable after: fewer than asked when the device ran out of memory part-way (what
  // was mapped stays mapped; no exception for that).
  virtual int32_t grow_kv(int32_t blocks) { return blocks; }
  // Unmaps the chunks above the first `blocks` blocks, once the work queued before has finished; returns the blocks
  // usable after. Only blocks no sequence holds and the prefix cache no longer keeps lie there.
  virtual int32_t trim_kv(int32_t blocks) { return blocks; }
  // The memory the KV pool and the state slots hold now (the mapped chunks of a growing pool); -1: as reserved.
  virtual int64_t kv_resident_bytes() const { return -1; }

  // The state slots' memory (models whose layers keep a state slot), the same way: a backend that maps it in chunks
  // as slots are needed (the CUDA decoder's) says so here, and the engine's StateSlots asks through these, on the
  // step thread only. The defaults are a fixed set, every slot usable from the start (the CPU's slots are in its
  // KvCache's lazily committed mapping already). state_slot_chunk(): slots per chunk; 0: the set is fixed.
  virtual int32_t state_slot_chunk() const { return 0; }
  // Slots usable now; -1: as many as the plan's n_state_slots.
  virtual int32_t state_slots_mapped() const { return -1; }
  // Maps chunks until the first `slots` slots are usable; returns the slots usable after: fewer than asked when the
  // device ran out of memory part-way (what was mapped stays mapped; no exception for that).
  virtual int32_t grow_state_slots(int32_t slots) { return slots; }
  // Unmaps the chunks above the first `slots` slots, once the work queued before has finished; returns the slots
  // usable after. No sequence holds a slot there.
  virtual int32_t trim_state_slots(int32_t slots) { return slots; }
  // The memory the state slots hold now (of kv_resident_bytes); -1: the plan's state_slot_bytes.
  virtual int64_t state_slot_resident_bytes() const { return -1; }
};

}  // namespace vt
