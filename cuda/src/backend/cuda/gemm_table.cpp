// The GEMM selection table (gemm_table.h): rules as bench_cuda_gemm measured them (bench/RESULTS.md, issue 30).
#include "backend/cuda/gemm_table.h"

namespace vt::cuda {

namespace {

// Hopper with the sm_90a kernels, H100 80GB HBM3, 2026-12-07 (bench_cuda_gemm; bench/RESULTS.md, issue 30). Each
// rule is the tile whose step time over both models' products (each times its layers) was least at those rows:
// up to 32 rows the mma.sync tiles with split-K to one work item per SM (8 rows: 1.05x the best kernel per
// product; the unsplit wgmma_m64n256 1.38x), then wgmma_m128n128 (128 and 512 rows: 1.01x), then wgmma_m128n256
// (2,048 rows: 1.08x). cuBLASLt's step time was 0.69x (32 rows) to 0.88x (2,048 rows) of these. The wgmma split-K
// (written after that run, not yet run on a GPU) stays out of the rules until it is measured. The GEMV keeps 4
// rows: at 8 rows a step's products took 1.31x the best tiles' time, at 16 rows 2.5x; fewer were not measured.
constexpr GemmRule kHopper[] = {
    {16, "mma_m16n128", 1}, {32, "mma_m32n128", 1}, {512, "wgmma_m128n128", 0}, {1 << 30, "wgmma_m128n256", 0},
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
