// The GEMM selection table (gemm_table.h). Rules as bench_cuda_ops --gemm-table printed them.
#include "backend/cuda/gemm_table.h"

namespace vt::cuda {

namespace {

// Hopper with the sm_90a kernels: not yet measured (first rules, to be replaced by the benchmark's). The GEMV keeps
// 4 rows, as it did beside cuBLASLt (at 8 rows it ran 0.65x of cuBLASLt's product, issue 30's table).
constexpr GemmRule kHopper[] = {
    {16, "mma_m16n128", 2}, {32, "mma_m32n128", 2}, {64, "mma_m64n128", 2}, {128, "mma_m128n128", 1},
    {256, "wgmma_m128n128", 0}, {1 << 30, "wgmma_m128n256", 0},
};
// Every other target (sm_80 .. sm_121): the mma.sync tiles only.
constexpr GemmRule kMma[] = {
    {16, "mma_m16n128", 2}, {32, "mma_m32n128", 2}, {64, "mma_m64n128", 2}, {1 << 30, "mma_m128n128", 1},
};

const GemmTable kHopperTable{"hopper (sm_90a: wgmma + TMA, mma.sync)", "", 4, kHopper,
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
