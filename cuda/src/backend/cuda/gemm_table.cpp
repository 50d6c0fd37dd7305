// The GEMM selection table (gemm_table.h): rules as bench_cuda_gemm measured them (bench/RESULTS.md, issue 30).
#include "backend/cuda/gemm_table.h"

namespace vt::cuda {

namespace {

// Hopper with the sm_90a kernels, H100 80GB HBM3, 2026-12-07 (bench_cuda_gemm, first run): the TMA-fed wgmma tiles
// stream the weights best from 8 rows on (wgmma_m64n256 0.90 of the copy rate on the 8B gate|up at 8 rows, the
// mma.sync tiles 0.78); at 128 to 512 rows wgmma_m128n128, beyond wgmma_m128n256. Their split-K (to one work item
// per SM where the tiles alone leave SMs idle: few columns, few rows) was added after that run. The GEMV keeps 4
// rows: at 8 rows a step's products (both models, each product times its layers) took 1.31x the best tiles' time,
// at 16 rows 2.5x; fewer rows were not measured in that run.
constexpr GemmRule kHopper[] = {
    {32, "wgmma_m64n256", 1}, {512, "wgmma_m128n128", 1}, {1 << 30, "wgmma_m128n256", 1},
};
// Every other target (sm_80 .. sm_121): the mma.sync tiles, ranked by the same run's mma figures (no such GPU was
// measured: the H100 stands in for the ranking, not the speed).
constexpr GemmRule kMma[] = {
    {16, "mma_m16n128", 1}, {32, "mma_m32n128", 1}, {128, "mma_m64n128", 1}, {1 << 30, "mma_m128n128", 1},
};

const GemmTable kHopperTable{"hopper (sm_90a: wgmma + TMA, mma.sync)", "H100 80GB HBM3, 2026-12-07", 4, kHopper,
                             int32_t(sizeof kHopper / sizeof kHopper[0])};
const GemmTable kMmaTable{"ampere and newer (mma.sync)", "", 4, kMma, int32_t(sizeof kMma / sizeof kMma[0])};

}  // namespace

const GemmTable &gemm_table(int cc, bool wgmma) { return cc == 90 && wgmma ? kHopperTable : kMmaTable; }

std::string gemm_rules_text(const GemmTable &t) {
  std::string s = t.gemv_rows > 1 ? "1-" + std::to_string(t.gemv_rows) + " rows: gemv" : "1 row: gemv";
  int32_t from = t.gemv_rows + 1;
  for (int32_t i = 0; i < t.n_rules && from <= t.rules[i].max_rows; ++i) {
    const GemmRule &r = t.rules[i];
    const bool last = i + 1 == t.n_rules;
    s += "; " + std::to_string(from) + (last ? "+" : "-" + std::to_string(r.max_rows)) + " rows: " + r.tile;
    if (r.blocks_per_sm > 0) s += ", split-K to " + std::to_string(r.blocks_per_sm) + " blocks/SM";
    from = r.max_rows + 1;
  }
  return s;
}

}  // namespace vt::cuda
