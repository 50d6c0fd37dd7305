// Entry points of the Hopper GEMM (gemm_wgmma.cuh): vt_gemm_wgmma_<tile>_<epilogue>, epilogues as gemm_mma.cu's.
// The mc_ tiles (weight slices multicast) are launched in clusters of (2, 1, 1), w's box (64, BN / 2) for every
// epilogue.
// Real code on sm_90a only; in the other targets' images they are empty, and TensorGemm looks them up only on a GPU
// of compute capability 9.0 (which loads the sm_90a cubin). Persistent: grid min(tiles x splits, SMs), the tile's
// threads, its shared memory (above 48 KiB: the limit is raised). ta: x's tensor map (K, M), box (64, BM); tb: w's
// (K, N), box (64, BN), or (64, BN / 2) for SwiGLU. Both 128-byte swizzled. ws / tickets: split-K's.
#include "gemm_wgmma.cuh"

using namespace vtk;

#define VT_GEMM_WGMMA_ENTRY(NAME, EPI, Y, SWIGLU)                                                                    \
  extern "C" __global__ void __launch_bounds__(WgTile_##NAME::kThreads, 1) vt_gemm_wgmma_##NAME##_##EPI(             \
      const __grid_constant__ TmaDesc ta, const __grid_constant__ TmaDesc tb, const float *bias, Y *y, int M, int N, \
      int K, int splits, float *ws, int *tickets) {                                                                  \
    gemm_wgmma<WgTile_##NAME, Y, SWIGLU>(ta, tb, bias, y, M, N, K, splits, ws, tickets);                             \
  }

#define VT_GEMM_WGMMA_TILE(NAME, BM, BN, ST, PINGPONG, MULTICAST) \
  using WgTile_##NAME = WgTile<BM, BN, ST, PINGPONG, MULTICAST>;  \
  VT_GEMM_WGMMA_ENTRY(NAME, bf16, bf16, false)  \
  VT_GEMM_WGMMA_ENTRY(NAME, f32, float, false)  \
  VT_GEMM_WGMMA_ENTRY(NAME, swiglu, bf16, true)

VT_GEMM_WGMMA_TILE(m128n256, 128, 256, 4, false, false)
VT_GEMM_WGMMA_TILE(m128n128, 128, 128, 6, false, false)
VT_GEMM_WGMMA_TILE(m64n256, 64, 256, 4, false, false)
// narrow products at 64-512 rows (0.6B's o_proj and down: N = 1,024): twice the blocks of m128n128
VT_GEMM_WGMMA_TILE(m64n128, 64, 128, 8, false, false)
// pingpong: two consumers on alternate tiles, each tile whole
VT_GEMM_WGMMA_TILE(pp_m128n128, 128, 128, 6, true, false)
VT_GEMM_WGMMA_TILE(pp_m64n256, 64, 256, 5, true, false)
VT_GEMM_WGMMA_TILE(pp_m64n128, 64, 128, 8, true, false)
// multicast: clusters of two blocks along M sharing each weight slice (prefill-sized products)
VT_GEMM_WGMMA_TILE(mc_m128n256, 128, 256, 4, false, true)
VT_GEMM_WGMMA_TILE(mc_pp_m64n256, 64, 256, 5, true, true)
VT_GEMM_WGMMA_TILE(mc_m128n128, 128, 128, 6, false, true)
