// What a captured greedy decode step's argmax also does, so that the chained step after it (Engine::step_overlapped)
// needs no copy between the two graphs: each row's pick goes straight into mapped host memory, and the step's
// metadata in device memory moves on by one token (positions, KV slots from the block tables, each sequence's pos0).
// A chained sampled step's sampler, after that argmax, replaces the pick (moved).
// Measured on the H200 (bench/RESULTS.md, session 11): the two copies between graphs cost 2.9% of the Qwen3-0.6B
// batch-1 step and 5% at batch 8. A plain struct shared by cuda_ops.h and the .cuh files (one kernel parameter).
#pragma once

#include <stdint.h>

namespace vt::cuda {

struct StepAdvance {
  int32_t *host_picks;    // mapped pinned memory (its device address): row r's id at [(position & 1) * picks_stride + r]
  int32_t *positions;     // (rows) the step's positions: + 1
  int32_t *slots;         // (rows) KV slots: the next position's (from tables); a row with a slot < 0 is padding, kept
  int32_t *seq_pos0;      // (rows) a decode step's sequence s is row s: + 1
  const int32_t *tables;  // (rows, table_width) block tables
  int32_t table_width;    // entries a row; a position past them gets slot -1
  int32_t block_size;
  int32_t picks_stride;   // ids a slot of host_picks
  int32_t moved;          // 1: this step's argmax moved the metadata on already (a chained sampled step's sampler
                          // after it): only the pick, into the slot of position - 1; positions alone is read
};
static_assert(sizeof(StepAdvance) == 56, "StepAdvance is read by the kernels as 56 bytes");

}  // namespace vt::cuda
