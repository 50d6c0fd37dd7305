// The GEMM selection table (gemm_table.h): rules as bench_cuda_gemm measured them (bench/RESULTS.md, issue 30).
#include "backend/cuda/gemm_table.h"

#include "status.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace vt::cuda {

namespace {

// Hopper with the sm_90a kernels (bench_cuda_gemm; bench/RESULTS.md, issue 30): per product of Qwen3-0.6B and
// Qwen3-8B and per M, the fastest tile. 8-256 rows: H100 80GB HBM3, 2026-12-07 (session 21), chained launches under
// programmatic dependent launch (bench_cuda_gemm's chains of 4), except that the cluster split-K tiles the bench
// chose for three 0.6B products (o_proj and down at 64 rows, down at 128) are replaced by the best other tile: in
// the engine's step they lost (0.6B decode b64 0.923x -> 0.941x of cuBLASLt, b128 0.936x -> 0.953x, the same call).
// 512 rows: H200, 2026-12-07 (session 20); 1,024-8,192 rows: H100, the kernels of 0114e11 (unchanged there since).
// One tile for all products at a given M had cost up to 1.38x the per-product best. The GEMV keeps 1-4 rows (an H100
// run: at 4 rows the 0.6B's products took 0.91x the tiles' time, the 8B's 1.04x; at 8 rows, chained, 1.58x / 1.53x).
constexpr GemmShape kHopperShapes[] = {
    {8, 4096, 1024, 0, "mma_m16n64", 0},  // 0.6B qkv
    {8, 1024, 2048, 0, "mma_m16n64", 2},  // 0.6B o_proj
    {8, 6144, 1024, 2, "mma_m16n64", 0},  // 0.6B gate_up
    {8, 1024, 3072, 0, "mma_m16n64", 1},  // 0.6B down
    {8, 151936, 1024, 1, "wgmma_m64n128", 0},  // 0.6B lm_head
    {8, 6144, 4096, 0, "wgmma_pp_m64n128", 1},  // 8B qkv
    {8, 4096, 4096, 0, "mma_m16n64", 2},  // 8B o_proj
    {8, 24576, 4096, 2, "wgmma_m64n256", 0},  // 8B gate_up
    {8, 4096, 12288, 0, "wgmma_pp_m64n128", 1},  // 8B down
    {8, 151936, 4096, 1, "wgmma_pp_m64n128", 0},  // 8B lm_head
    {16, 4096, 1024, 0, "mma_m16n64", 0},  // 0.6B qkv
    {16, 1024, 2048, 0, "mma_m16n64", 4},  // 0.6B o_proj
    {16, 6144, 1024, 2, "mma_m16n64", 0},  // 0.6B gate_up
    {16, 1024, 3072, 0, "mma_m16n64", 1},  // 0.6B down
    {16, 151936, 1024, 1, "wgmma_m64n128", 0},  // 0.6B lm_head
    {16, 6144, 4096, 0, "wgmma_pp_m64n128", 1},  // 8B qkv
    {16, 4096, 4096, 0, "mma_m16n64", 2},  // 8B o_proj
    {16, 24576, 4096, 2, "wgmma_pp_m64n128", 4},  // 8B gate_up
    {16, 4096, 12288, 0, "wgmma_pp_m64n128", 1},  // 8B down
    {16, 151936, 4096, 1, "wgmma_pp_m64n128", 0},  // 8B lm_head
    {32, 4096, 1024, 0, "mma_m16n64", 0},  // 0.6B qkv
    {32, 1024, 2048, 0, "mma_m16n64", 1},  // 0.6B o_proj
    {32, 6144, 1024, 2, "mma_m32n64", 1},  // 0.6B gate_up
    {32, 1024, 3072, 0, "mma_m16n64", 1},  // 0.6B down
    {32, 151936, 1024, 1, "wgmma_pp_m64n128", 0},  // 0.6B lm_head
    {32, 6144, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B qkv
    {32, 4096, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B o_proj
    {32, 24576, 4096, 2, "wgmma_pp_m64n128", 0},  // 8B gate_up
    {32, 4096, 12288, 0, "wgmma_pp_m64n128", 1},  // 8B down
    {32, 151936, 4096, 1, "wgmma_m64n128", 0},  // 8B lm_head
    {64, 4096, 1024, 0, "wgmma_pp_m64n128", 0},  // 0.6B qkv
    {64, 1024, 2048, 0, "mma_m32n64", 1},  // 0.6B o_proj
    {64, 6144, 1024, 2, "wgmma_pp_m64n128", 0},  // 0.6B gate_up
    {64, 1024, 3072, 0, "mma_m32n64", 1},  // 0.6B down
    {64, 151936, 1024, 1, "wgmma_pp_m64n128", 0},  // 0.6B lm_head
    {64, 6144, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B qkv
    {64, 4096, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B o_proj
    {64, 24576, 4096, 2, "wgmma_pp_m64n128", 0},  // 8B gate_up
    {64, 4096, 12288, 0, "wgmma_pp_m64n128", 1},  // 8B down
    {64, 151936, 4096, 1, "wgmma_pp_m64n128", 0},  // 8B lm_head
    {128, 4096, 1024, 0, "wgmma_pp_m64n128", 0},  // 0.6B qkv
    {128, 1024, 2048, 0, "wgmma_pp_m64n128", 0},  // 0.6B o_proj
    {128, 6144, 1024, 2, "wgmma_pp_m64n128", 0},  // 0.6B gate_up
    {128, 1024, 3072, 0, "wgmma_pp_m64n128", 0},  // 0.6B down
    {128, 151936, 1024, 1, "wgmma_pp_m128n128", 0},  // 0.6B lm_head
    {128, 6144, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B qkv
    {128, 4096, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B o_proj
    {128, 24576, 4096, 2, "wgmma_pp_m64n128", 0},  // 8B gate_up
    {128, 4096, 12288, 0, "wgmma_pp_m64n128", 0},  // 8B down
    {128, 151936, 4096, 1, "wgmma_pp_m128n128", 0},  // 8B lm_head
    {256, 4096, 1024, 0, "wgmma_pp_m64n128", 0},  // 0.6B qkv
    {256, 1024, 2048, 0, "wgmma_pp_m64n128", 0},  // 0.6B o_proj
    {256, 6144, 1024, 2, "wgmma_m128n128", 0},  // 0.6B gate_up
    {256, 1024, 3072, 0, "wgmma_m64n128", 1},  // 0.6B down
    {256, 151936, 1024, 1, "wgmma_m128n256", 0},  // 0.6B lm_head
    {256, 6144, 4096, 0, "wgmma_m128n128", 0},  // 8B qkv
    {256, 4096, 4096, 0, "wgmma_pp_m64n128", 0},  // 8B o_proj
    {256, 24576, 4096, 2, "wgmma_m128n128", 0},  // 8B gate_up
    {256, 4096, 12288, 0, "wgmma_m128n128", 1},  // 8B down
    {256, 151936, 4096, 1, "wgmma_m128n256", 0},  // 8B lm_head
    {512, 4096, 1024, 0, "wgmma_pp_m64n128", 0},  // 0.6B qkv
    {512, 1024, 2048, 0, "wgmma_pp_m64n128", 0},  // 0.6B o_proj
    {512, 6144, 1024, 2, "wgmma_pp_m64n128", 0},  // 0.6B gate_up
    {512, 1024, 3072, 0, "wgmma_pp_m64n128", 1},  // 0.6B down
    {512, 6144, 4096, 0, "wgmma_m64n128", 0},  // 8B qkv
    {512, 4096, 4096, 0, "wgmma_m128n128", 0},  // 8B o_proj
    {512, 24576, 4096, 2, "wgmma_pp_m64n256", 0},  // 8B gate_up
    {512, 4096, 12288, 0, "wgmma_m128n128", 0},  // 8B down
    {1024, 4096, 1024, 0, "wgmma_pp_m128n128", 0},      // 0.6B qkv
    {1024, 1024, 2048, 0, "wgmma_m128n128", 0},         // 0.6B o_proj
    {1024, 6144, 1024, 2, "wgmma_m128n128", 0},         // 0.6B gate_up
    {1024, 1024, 3072, 0, "wgmma_m128n128", 0},         // 0.6B down
    {1024, 6144, 4096, 0, "wgmma_m64n256", 0},          // 8B qkv
    {1024, 4096, 4096, 0, "wgmma_m128n256", 0},         // 8B o_proj
    {1024, 24576, 4096, 2, "wgmma_pp_m64n256", 0},      // 8B gate_up
    {1024, 4096, 12288, 0, "wgmma_m128n256", 0},        // 8B down
    {2048, 4096, 1024, 0, "wgmma_pp_m64n256", 0},       // 0.6B qkv
    {2048, 1024, 2048, 0, "wgmma_pp_m64n256", 0},       // 0.6B o_proj
    {2048, 6144, 1024, 2, "wgmma_pp_m64n256", 0},       // 0.6B gate_up
    {2048, 1024, 3072, 0, "wgmma_pp_m64n256", 0},       // 0.6B down
    {2048, 6144, 4096, 0, "wgmma_m128n256", 0},         // 8B qkv
    {2048, 4096, 4096, 0, "wgmma_m128n256", 0},         // 8B o_proj
    {2048, 24576, 4096, 2, "wgmma_pp_m128n128", 0},     // 8B gate_up
    {2048, 4096, 12288, 0, "wgmma_m128n256", 0},        // 8B down
    {8192, 4096, 1024, 0, "wgmma_m128n256", 0},         // 0.6B qkv
    {8192, 1024, 2048, 0, "wgmma_m128n256", 0},         // 0.6B o_proj
    {8192, 6144, 1024, 2, "wgmma_pp_m64n256", 0},       // 0.6B gate_up
    {8192, 1024, 3072, 0, "wgmma_m128n256", 0},         // 0.6B down
    {8192, 6144, 4096, 0, "wgmma_m128n256", 0},         // 8B qkv
    {8192, 4096, 4096, 0, "wgmma_m128n256", 0},         // 8B o_proj
    {8192, 24576, 4096, 2, "wgmma_m128n256", 0},        // 8B gate_up
    {8192, 4096, 12288, 0, "wgmma_m128n256", 0},        // 8B down
};
// By rows alone (a tile missing from the image; the summary doctor prints): the tiles most entries chose.
constexpr GemmRule kHopper[] = {
    {32, "mma_m16n64", 1}, {512, "wgmma_pp_m64n128", 0}, {1 << 30, "wgmma_pp_m64n256", 0},
};
// Every other target (sm_80 .. sm_121): the mma.sync tiles, ranked by the same run's mma figures (no such GPU was
// measured: the H100 stands in for the ranking, not the speed).
constexpr GemmRule kMma[] = {
    {16, "mma_m16n128", 1}, {32, "mma_m32n128", 1}, {128, "mma_m64n128", 1}, {1 << 30, "mma_m128n128", 1},
};

const GemmTable kHopperTable{"hopper (sm_90a: wgmma + TMA, mma.sync)",
                             "H200 (8-512 rows) and H100 80GB HBM3 (1,024-8,192), 2026-12-07",
                             4,
                             kHopper,
                             int32_t(sizeof kHopper / sizeof kHopper[0]),
                             kHopperShapes,
                             int32_t(sizeof kHopperShapes / sizeof kHopperShapes[0])};
const GemmTable kMmaTable{"ampere and newer (mma.sync)", "", 4, kMma, int32_t(sizeof kMma / sizeof kMma[0])};

// gemm_shapes_override's table (experiments builds only): null until it is called.
const GemmTable *g_override = nullptr;

}  // namespace

void gemm_shapes_override(const std::string &path) {
  static std::vector<GemmShape> shapes;
  static std::vector<std::string> names;
  static GemmTable table = kHopperTable;
  std::ifstream in(path);
  if (!in) fail(VT_ERR_INVALID_OPTION, "VT_CUDA_GEMM_SHAPES: cannot read " + path);
  std::vector<GemmShape> read;
  std::vector<std::string> read_names;
  std::string line;
  while (std::getline(in, line)) {  // lines not of bench_cuda_gemm's entry form are skipped
    int m, n, k, out, bps;
    char tile[64];
    if (std::sscanf(line.c_str(), " {%d, %d, %d, %d, \"%63[^\"]\", %d}", &m, &n, &k, &out, tile, &bps) == 6)
      read.push_back({m, n, k, out, nullptr, bps}), read_names.push_back(tile);
  }
  shapes = std::move(read), names = std::move(read_names);
  for (size_t i = 0; i < shapes.size(); ++i) shapes[i].tile = names[i].c_str();
  table.measured = "VT_CUDA_GEMM_SHAPES";
  table.shapes = shapes.data(), table.n_shapes = int32_t(shapes.size());
  g_override = &table;
  std::fprintf(stderr, "vtengine: VT_CUDA_GEMM_SHAPES: %zu GEMM shapes from %s\n", shapes.size(), path.c_str());
}

const GemmTable &gemm_table(int cc, bool wgmma) {
  if (cc == 90 && wgmma) return g_override ? *g_override : kHopperTable;
  return kMmaTable;
}

GemmPick gemm_pick(const GemmTable &t, int64_t M, int64_t N, int64_t K, int out) {
  if (t.n_shapes > 0) {
    // The measured row count: the least at or above M, else the largest.
    int32_t rows = 0, top = 0;
    for (int32_t i = 0; i < t.n_shapes; ++i) {
      const int32_t r = t.shapes[i].rows;
      top = std::max(top, r);
      if (r >= M && (rows == 0 || r < rows)) rows = r;
    }
    if (rows == 0) rows = top;
    bool kind = false;  // a shape of this output kind was measured at those rows
    for (int32_t i = 0; i < t.n_shapes; ++i) kind |= t.shapes[i].rows == rows && t.shapes[i].out == out;
    const GemmShape *best = nullptr;
    double best_d = 0;
    for (int32_t i = 0; i < t.n_shapes; ++i) {
      const GemmShape &s = t.shapes[i];
      if (s.rows != rows || (kind && s.out != out)) continue;
      const double d = std::fabs(std::log(double(N) / s.n)) + std::fabs(std::log(double(K) / s.k));
      if (!best || d < best_d) best = &s, best_d = d;
    }
    if (best) return {best->tile, best->blocks_per_sm};
  }
  for (int32_t i = 0; i < t.n_rules; ++i)
    if (M <= t.rules[i].max_rows || i + 1 == t.n_rules) return {t.rules[i].tile, t.rules[i].blocks_per_sm};
  return {nullptr, 0};
}

std::string gemm_rules_text(const GemmTable &t) {
  std::string s = t.gemv_rows > 1 ? "1-" + std::to_string(t.gemv_rows) + " rows: gemv" : "1 row: gemv";
  if (t.n_shapes > 0) {  // per measured row count, the tiles its shapes chose and how many chose each
    s += "; then per product shape (the nearest of " + std::to_string(t.n_shapes) + " measured)";
    std::vector<int32_t> rows;
    for (int32_t i = 0; i < t.n_shapes; ++i)
      if (std::find(rows.begin(), rows.end(), t.shapes[i].rows) == rows.end()) rows.push_back(t.shapes[i].rows);
    std::sort(rows.begin(), rows.end());
    for (int32_t r : rows) {
      std::vector<std::pair<std::string, int>> tiles;
      for (int32_t i = 0; i < t.n_shapes; ++i) {
        if (t.shapes[i].rows != r) continue;
        const std::string name = std::string(t.shapes[i].tile) + (t.shapes[i].blocks_per_sm ? " split-K" : "");
        auto it = std::find_if(tiles.begin(), tiles.end(), [&](const auto &p) { return p.first == name; });
        if (it == tiles.end()) tiles.push_back({name, 1});
        else ++it->second;
      }
      s += "; " + std::to_string(r) + " rows:";
      for (size_t i = 0; i < tiles.size(); ++i)
        s += (i ? ", " : " ") + tiles[i].first + " x" + std::to_string(tiles[i].second);
    }
    return s;
  }
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
