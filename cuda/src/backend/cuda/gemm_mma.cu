// Entry points of the mma.sync GEMM (gemm_mma.cuh): vt_gemm_mma_<tile>_<epilogue>, tile as gemm_tiles.h names it,
// epilogue bf16 (y bf16, optional bias), f32 (y fp32, optional bias) or swiglu (y bf16, gate|up weights, no bias).
// Grid (n tiles, m tiles, splits), the tile's threads, its shared memory (Ops sets the limit above 48 KiB).
#include "gemm_mma.cuh"

using namespace vtk;

// name, BM, BN, BK, warps along M, warps along N, stages
#define VT_GEMM_MMA_TILE(NAME, BM, BN, BK, WM, WN, ST)                                                              \
  using Tile_##NAME = MmaTile<BM, BN, BK, WM, WN, ST>;                                                              \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32) vt_gemm_mma_##NAME##_bf16(                           \
      const bf16 *x, const bf16 *w, const float *bias, bf16 *y, int M, int N, int K, float *ws, int *tickets) {      \
    gemm_mma<Tile_##NAME, bf16, false>(x, w, bias, y, M, N, K, ws, tickets);                                         \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32) vt_gemm_mma_##NAME##_f32(                            \
      const bf16 *x, const bf16 *w, const float *bias, float *y, int M, int N, int K, float *ws, int *tickets) {     \
    gemm_mma<Tile_##NAME, float, false>(x, w, bias, y, M, N, K, ws, tickets);                                        \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32) vt_gemm_mma_##NAME##_swiglu(                         \
      const bf16 *x, const bf16 *w, const float *bias, bf16 *y, int M, int N, int K, float *ws, int *tickets) {      \
    gemm_mma<Tile_##NAME, bf16, true>(x, w, bias, y, M, N, K, ws, tickets);                                          \
  }

VT_GEMM_MMA_TILE(m128n128, 128, 128, 32, 2, 4, 4)
VT_GEMM_MMA_TILE(m64n128, 64, 128, 64, 2, 2, 3)
VT_GEMM_MMA_TILE(m32n128, 32, 128, 64, 1, 4, 4)
VT_GEMM_MMA_TILE(m16n128, 16, 128, 64, 1, 4, 4)
// decode batches of up to 16 / 32 rows: half the columns a block, twice the blocks before any split, deeper stages
// (cuBLASLt's choice there is a 64-column tile: its 8-row decode products took 0.8x our m16n128's time on the H200)
VT_GEMM_MMA_TILE(m16n64, 16, 64, 64, 1, 4, 6)
VT_GEMM_MMA_TILE(m32n64, 32, 64, 64, 2, 2, 6)
