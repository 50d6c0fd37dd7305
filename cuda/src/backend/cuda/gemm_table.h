// Which GEMM serves a product, per GPU family, number of rows and product shape: the decode GEMV up to gemv_rows,
// then the tile measured fastest on the nearest measured shape (gemm_pick). Measured, not guessed:
// `bench_cuda_gemm` times every tile (and split count) on the models' shapes and prints this table;
// gemm_table.cpp holds what it printed, with the machine and date. A family no one could measure says so (`measured` empty), and doctor / Engine.systemInfo() show it.
#pragma once

#include <cstdint>
#include <string>

namespace vt::cuda {

struct GemmRule {
  int32_t max_rows;       // this rule serves products of up to this many rows (the last rule: any)
  const char *tile;       // a TensorGemm tile name
  int32_t blocks_per_sm;  // split-K brings an mma tile's grid to this many blocks per SM (0: no split-K)
};

// One measured product: at `rows` rows, a weight of n rows and k columns with output `out` (TensorGemm::Out: 0 bf16,
// 1 fp32, 2 SwiGLU) ran fastest on `tile` with split-K to blocks_per_sm blocks per SM (0: none).
struct GemmShape {
  int32_t rows, n, k, out;
  const char *tile;
  int32_t blocks_per_sm;
};

struct GemmTable {
  const char *family;    // "hopper (sm_90a)", "ampere and newer (mma.sync)"
  const char *measured;  // where the rules were measured ("" : not measured, the Hopper rules' mma picks)
  int32_t gemv_rows;     // products of up to this many rows take the decode GEMV (gemv.cuh)
  const GemmRule *rules;  // by rows alone: the family's picks where it has no shapes, and the fallback
  int32_t n_rules;
  const GemmShape *shapes = nullptr;  // per product shape, where measured (the models' products at each M)
  int32_t n_shapes = 0;
};

// The table for a GPU of compute capability cc (e.g. 90) whose kernel image has the wgmma kernels or not.
const GemmTable &gemm_table(int cc, bool wgmma);

// Experiments builds' VT_CUDA_GEMM_SHAPES (tuning.h; the decoder calls this): Hopper's shapes from then on are the
// bench_cuda_gemm entries in the file at `path`. Throws vt::Error (INVALID_OPTION) when it cannot be read.
void gemm_shapes_override(const std::string &path);

// A product's tile. With shapes: those measured at the least measured row count >= M (the largest when M is
// beyond them all), and among them the nearest weight shape in (log n, log k), of the same output kind when one
// was measured: a model's products are the measured ones, another model's take the most alike (the tile that won
// on a shape of the same fill and depth). Without shapes: the first rule whose max_rows covers M.
struct GemmPick {
  const char *tile;
  int32_t blocks_per_sm;
};
GemmPick gemm_pick(const GemmTable &t, int64_t M, int64_t N, int64_t K, int out);

// Its rules in words, for doctor and Engine.systemInfo(): "1-8 rows: gemv; 9-16 rows: mma_m16n128, split-K to 2
// blocks/SM; ...; 257+ rows: wgmma_m128n256".
std::string gemm_rules_text(const GemmTable &t);

}  // namespace vt::cuda
