// Which GEMM serves a product, per GPU family and number of rows: the decode GEMV up to gemv_rows, then the first
// rule whose max_rows covers M. Measured, not guessed: `bench_cuda_ops --gemm-table` times every tile (and split
// count) on the models' shapes and prints this table; gemm_table.cpp holds what it printed, with the machine and
// date. A family no one could measure says so (`measured` empty), and doctor / Engine.systemInfo() show it.
#pragma once

#include <cstdint>
#include <string>

namespace vt::cuda {

struct GemmRule {
  int32_t max_rows;       // this rule serves products of up to this many rows (the last rule: any)
  const char *tile;       // a TensorGemm tile name
  int32_t blocks_per_sm;  // split-K brings an mma tile's grid to this many blocks per SM (0: no split-K)
};

struct GemmTable {
  const char *family;    // "hopper (sm_90a)", "ampere and newer (mma.sync)"
  const char *measured;  // where the rules were measured ("" : not measured, the Hopper rules' mma picks)
  int32_t gemv_rows;     // products of up to this many rows take the decode GEMV (gemv.cuh)
  const GemmRule *rules;
  int32_t n_rules;
};

// The table for a GPU of compute capability cc (e.g. 90) whose kernel image has the wgmma kernels or not.
const GemmTable &gemm_table(int cc, bool wgmma);

// Its rules in words, for doctor and Engine.systemInfo(): "1-8 rows: gemv; 9-16 rows: mma_m16n128, split-K to 2
// blocks/SM; ...; 257+ rows: wgmma_m128n256".
std::string gemm_rules_text(const GemmTable &t);

}  // namespace vt::cuda
