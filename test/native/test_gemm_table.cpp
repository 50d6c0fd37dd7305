// The GEMM selection table's lookup (gemm_table.h), without a GPU: every measured shape picks its own tile; a row
// count between the measured ones takes the next measured one up (a tile must cover the rows), beyond them the
// largest; an output kind picks among shapes of that kind; an unmeasured model's product takes the nearest shape;
// every tile named is one TensorGemm has; the family without shapes goes by its rules; and the summary doctor
// prints names every measured row count.
#include <cstdio>
#include <set>
#include <string>

#include "backend/cuda/gemm_table.h"
#include "backend/cuda/tensor_gemm.h"
#include "check.h"
#include "status.h"

using namespace vt::cuda;

static const GemmTable &hopper() { return gemm_table(90, true); }

static std::string pick_text(const GemmPick &p) {
  return p.tile ? std::string(p.tile) + "/" + std::to_string(p.blocks_per_sm) : "(none)";
}

static void measured_shapes_pick_themselves() {
  const GemmTable &t = hopper();
  CHECK(t.n_shapes > 0);
  std::set<std::string> tiles;
  for (int i = 0; i < TensorGemm::kTileCount; ++i) tiles.insert(TensorGemm::kTiles[i].name);
  for (int32_t i = 0; i < t.n_shapes; ++i) {
    const GemmShape &s = t.shapes[i];
    CHECK(tiles.count(s.tile) == 1);
    CHECK(s.rows > t.gemv_rows && s.out >= 0 && s.out <= 2 && s.blocks_per_sm >= 0 && s.blocks_per_sm <= 4);
    const GemmPick p = gemm_pick(t, s.rows, s.n, s.k, s.out);
    const bool same = p.tile && std::string(p.tile) == s.tile && p.blocks_per_sm == s.blocks_per_sm;
    record(same, "shape " + std::to_string(s.rows) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k) +
                     " picks its own tile", pick_text(p) + " for " + s.tile);
  }
  for (int i = 0; i < TensorGemm::kTileCount; ++i) CHECK(TensorGemm::tile_index(TensorGemm::kTiles[i].name) == i);
}

// The entry of the measured shape (rows, n, k, out), or null.
static const GemmShape *entry(int32_t rows, int32_t n, int32_t k, int32_t out) {
  const GemmTable &t = hopper();
  for (int32_t i = 0; i < t.n_shapes; ++i)
    if (t.shapes[i].rows == rows && t.shapes[i].n == n && t.shapes[i].k == k && t.shapes[i].out == out)
      return &t.shapes[i];
  return nullptr;
}

static bool picks(const GemmPick &p, const GemmShape *e) {
  return e && p.tile && std::string(p.tile) == e->tile && p.blocks_per_sm == e->blocks_per_sm;
}

static void rows_round_up() {
  const GemmTable &t = hopper();
  // Qwen3-0.6B's o_proj (1024 x 2048) and Qwen3-8B's gate|up (24576 x 4096, SwiGLU), measured at 8 ... 8192 rows.
  for (const auto &[M, rows] : {std::pair{5, 8}, {8, 8}, {9, 16}, {24, 32}, {33, 64}, {100, 128}, {300, 512},
                                {513, 1024}, {1025, 2048}, {2048, 2048}, {5000, 8192}, {20000, 8192}}) {
    CHECK(picks(gemm_pick(t, M, 1024, 2048, 0), entry(rows, 1024, 2048, 0)));
    CHECK(picks(gemm_pick(t, M, 24576, 4096, 2), entry(rows, 24576, 4096, 2)));
  }
}

static void nearest_shape() {
  const GemmTable &t = hopper();
  // A Qwen3.5-27B-like o_proj (5120 x 6144) at 32 rows, among the bf16 outputs: |ln(n / n')| + |ln(k / k')| is
  // 0.18 + 0.41 = 0.59 to the 8B's qkv (6144 x 4096), 0.22 + 0.41 = 0.63 to its o_proj (4096 x 4096), 0.92 to its
  // down (4096 x 12288), 2.0 or more to the 0.6B's: the 8B qkv's entry.
  CHECK(picks(gemm_pick(t, 32, 5120, 6144, 0), entry(32, 6144, 4096, 0)));
  // Its lm_head (248320 x 5120, fp32 logits) at 8 rows: among the fp32 outputs, the 8B's lm_head.
  CHECK(picks(gemm_pick(t, 8, 248320, 5120, 1), entry(8, 151936, 4096, 1)));
  // A SwiGLU product picks among SwiGLU entries even where a bf16 shape is nearer: 6144 x 1024 is the 0.6B qkv's
  // shape too.
  CHECK(picks(gemm_pick(t, 8, 6144, 1024, 2), entry(8, 6144, 1024, 2)));
  CHECK(picks(gemm_pick(t, 8, 4096, 1024, 0), entry(8, 4096, 1024, 0)));
  // fp32 logits beyond the rows the lm_head was measured at (256): no fp32 entry at 2,048 rows, so the nearest of
  // any kind.
  const GemmPick far = gemm_pick(t, 1000, 151936, 4096, 1);
  CHECK(far.tile != nullptr);
}

static void rules_without_shapes() {
  const GemmTable &t = gemm_table(86, false);
  CHECK(t.n_shapes == 0 && t.n_rules > 0);
  for (int32_t i = 0; i < t.n_rules; ++i) {
    const GemmRule &r = t.rules[i];
    CHECK(TensorGemm::tile_index(r.tile) >= 0);
    const GemmPick p = gemm_pick(t, r.max_rows == (1 << 30) ? 100000 : r.max_rows, 4096, 4096, 0);
    CHECK(p.tile && std::string(p.tile) == r.tile && p.blocks_per_sm == r.blocks_per_sm);
  }
  // Hopper without its wgmma kernels (an image built without sm_90a): the mma.sync family.
  CHECK(&gemm_table(90, false) == &t);
}

static void summary() {
  const std::string s = gemm_rules_text(hopper());
  CHECK(s.rfind("1-4 rows: gemv", 0) == 0);
  for (int32_t r : {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 8192}) CHECK(s.find("; " + std::to_string(r) + " rows:") != std::string::npos);
  std::printf("hopper: %s\n", s.c_str());
  std::printf("others: %s\n", gemm_rules_text(gemm_table(120, false)).c_str());
}

// VT_CUDA_GEMM_SHAPES's table (experiments builds; the function is in every build): bench_cuda_gemm's printed
// entries, other lines skipped; an unreadable file is INVALID_OPTION naming it. Last: it replaces Hopper's shapes.
static void shapes_override() {
  const std::string path = "/tmp/vt-test-gemm-shapes.txt";
  if (FILE *f = std::fopen(path.c_str(), "w")) {
    std::fputs("// bench_cuda_gemm on ...\n    {8, 1024, 2048, 0, \"wgmma_m64n128\", 2},  // 0.6B o_proj\n"
               "//   M     8: ...\n    {64, 4096, 4096, 0, \"wgmma_pp_m128n128\", 0},  // 8B o_proj\n", f);
    std::fclose(f);
  }
  bool threw = false;
  try {
    gemm_shapes_override("/nonexistent/shapes.txt");
  } catch (const vt::Error &e) {
    threw = e.status() == VT_ERR_INVALID_OPTION && std::string(e.what()).find("/nonexistent/shapes.txt") != std::string::npos;
  }
  CHECK(threw);
  gemm_shapes_override(path);
  const GemmTable &t = hopper();
  CHECK(t.n_shapes == 2 && std::string(t.measured) == "VT_CUDA_GEMM_SHAPES");
  const GemmPick p = gemm_pick(t, 5, 1024, 2048, 0);
  CHECK(p.tile && std::string(p.tile) == "wgmma_m64n128" && p.blocks_per_sm == 2);
  CHECK(std::string(gemm_pick(t, 100, 1024, 2048, 0).tile) == "wgmma_pp_m128n128");  // beyond them all: the largest
  std::remove(path.c_str());
}

int main() {
  measured_shapes_pick_themselves();
  rows_round_up();
  nearest_shape();
  rules_without_shapes();
  summary();
  shapes_override();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
