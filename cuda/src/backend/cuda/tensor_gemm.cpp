// TensorGemm (tensor_gemm.h): kernel lookup, the table's choice, split-K and the launches.
#include "backend/cuda/tensor_gemm.h"

#include <algorithm>
#include <climits>

#include "backend/cuda/gemm_table.h"
#include "status.h"

namespace vt::cuda {

namespace {

// gemm_mma.cuh's MmaTile and gemm_wgmma.cuh's WgTile, as gemm_mma.cu / gemm_wgmma.cu instantiate them. Shared
// memory: mma ST x (BM + BN) x (BK + 8) x 2; wgmma ST x (BM + BN) x 128 + 2 ST x 8 + 1024.
constexpr int mma_smem(int bm, int bn, int bk, int st) { return st * (bm + bn) * (bk + 8) * 2; }
constexpr int wg_smem(int bm, int bn, int st) { return st * (bm + bn) * 128 + 2 * st * 8 + 1024; }

const char *kOutNames[3] = {"bf16", "f32", "swiglu"};
// gemm_table.h's GemmShape::out numbers the outputs so
static_assert(int(TensorGemm::Out::kBf16) == 0 && int(TensorGemm::Out::kF32) == 1 && int(TensorGemm::Out::kSwiGLU) == 2);

}  // namespace

const TensorGemm::Tile TensorGemm::kTiles[kTileCount] = {
    // name, wgmma, BM, BN, BK, threads, shared memory, threads with accumulators, accumulators per thread
    {"mma_m16n128", false, 16, 128, 64, 128, mma_smem(16, 128, 64, 4), 128, 1 * 4 * 4},
    {"mma_m32n128", false, 32, 128, 64, 128, mma_smem(32, 128, 64, 4), 128, 2 * 4 * 4},
    {"mma_m64n128", false, 64, 128, 64, 128, mma_smem(64, 128, 64, 3), 128, 2 * 8 * 4},
    {"mma_m128n128", false, 128, 128, 32, 256, mma_smem(128, 128, 32, 4), 256, 4 * 4 * 4},
    {"wgmma_m64n256", true, 64, 256, 64, 256, wg_smem(64, 256, 4), 128, 128},
    {"wgmma_m128n128", true, 128, 128, 64, 384, wg_smem(128, 128, 6), 256, 64},
    {"wgmma_m128n256", true, 128, 256, 64, 384, wg_smem(128, 256, 4), 256, 128},
    {"wgmma_pp_m128n128", true, 128, 128, 64, 384, wg_smem(128, 128, 6), 128, 128},
    {"wgmma_pp_m64n256", true, 64, 256, 64, 384, wg_smem(64, 256, 5), 128, 128},
    {"wgmma_m64n128", true, 64, 128, 64, 256, wg_smem(64, 128, 8), 128, 64},
    {"wgmma_pp_m64n128", true, 64, 128, 64, 384, wg_smem(64, 128, 8), 128, 64},
    {"mma_m16n64", false, 16, 64, 64, 128, mma_smem(16, 64, 64, 6), 128, 1 * 2 * 4},
    {"mma_m32n64", false, 32, 64, 64, 128, mma_smem(32, 64, 64, 6), 128, 1 * 4 * 4},
    {"wgmma_mc_m128n256", true, 128, 256, 64, 384, wg_smem(128, 256, 4), 256, 128, true},
    {"wgmma_mc_pp_m64n256", true, 64, 256, 64, 384, wg_smem(64, 256, 5), 128, 128, true},
    {"wgmma_mc_m128n128", true, 128, 128, 64, 384, wg_smem(128, 128, 6), 256, 64, true},
};

const char *out_name(TensorGemm::Out o) { return kOutNames[int(o)]; }

int TensorGemm::tile_index(const std::string &name) {
  for (int i = 0; i < kTileCount; ++i)
    if (name == kTiles[i].name) return i;
  return -1;
}

TensorGemm::TensorGemm(Context &ctx, CUstream stream, bool pdl_mma, bool pdl_wgmma)
    : ctx_(ctx), pdl_mma_(pdl_mma), pdl_wgmma_(pdl_wgmma) {
  const Driver &d = driver();
  int smem_optin = 0;
  check(d.cuDeviceGetAttribute(&smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx.device()),
        "cuDeviceGetAttribute(shared memory per block)");
  // The wgmma kernels have real code in the sm_90a cubin only: a GPU of compute capability 9.0 loads that one.
  has_wgmma_ = ctx.compute_capability() == 90;
  bool mma_all = true;
  for (int i = 0; i < kTileCount; ++i) {
    const Tile &t = kTiles[i];
    if (t.wgmma && !has_wgmma_) continue;
    for (int o = 0; o < 3; ++o) {
      CUfunction f = ctx.find_function(std::string("vt_gemm_") + t.name + "_" + kOutNames[o]);
      // A tile whose shared memory this GPU cannot give one block is left out (sm_86/89/120 have 99 KiB).
      if (f && t.smem_bytes > smem_optin) f = nullptr;
      if (f && t.smem_bytes > 48 * 1024)
        check(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, t.smem_bytes),
              std::string("cuFuncSetAttribute(vt_gemm_") + t.name + ")");
      fn_[i][o] = f;
      // A persistent grid of pairs is as many clusters as fit at once (a pair needs two free SMs of one GPC).
      if (f && t.multicast && o == 0) {
        CUlaunchAttribute attr{};
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim = {2, 1, 1};
        const CUlaunchConfig cfg{unsigned(2 * ctx.sm_count()), 1, 1, unsigned(t.threads), 1, 1, unsigned(t.smem_bytes),
                                 stream, &attr, 1};
        int clusters = 0;
        resident_pairs_[i] = d.cuOccupancyMaxActiveClusters(&clusters, f, &cfg) == CUDA_SUCCESS && clusters > 0
                                 ? clusters : ctx.sm_count() / 2;
      }
      if (!f && !t.wgmma) mma_all = false;
      if (!f && t.wgmma) has_wgmma_ = false;
    }
  }
  if (!mma_all) {
    reason_ = "this build's kernel image lacks the tensor-core GEMM kernels (gemm_mma.cu)";
    return;
  }
  split_ = DeviceBuffer(size_t(kWorkspaceBytes));
  check(d.cuMemsetD8Async(split_.ptr(), 0, split_.bytes(), stream), "cuMemsetD8Async(split-K tickets)");
  available_ = true;
}

TensorGemm::Choice TensorGemm::with_splits(int tile, int64_t M, int64_t N, int64_t K, Out out,
                                           int target_blocks) const {
  const Tile &t = kTiles[tile];
  Choice c{tile, 1};
  if (target_blocks <= 0 || t.multicast) return c;
  const int64_t out_n = out == Out::kSwiGLU ? N / 2 : N, tile_n = out == Out::kSwiGLU ? t.bn / 2 : t.bn;
  const int64_t tiles = ((M + t.bm - 1) / t.bm) * ((out_n + tile_n - 1) / tile_n);
  const int64_t k_steps = (K + t.bk - 1) / t.bk;
  const int64_t per_block = int64_t(t.acc_threads) * t.frag_floats * 4;
  // The wgmma grid is persistent (one block per SM, each taking work items in turn): one item too many is a second
  // wave for its block, which doubled the time of products whose rounded-up split count passed the SMs by a few.
  // So there the splits fill the target without passing it; the mma grid's blocks co-reside, and round up.
  int64_t splits = t.wgmma ? target_blocks / tiles : (target_blocks + tiles - 1) / tiles;
  splits = std::min<int64_t>({splits, k_steps / 4, 16, int64_t(kSplitBytes) / (per_block * tiles)});
  if (splits <= 1 || tiles > kTickets) return c;
  // Even K shares: the last split would otherwise run short and the others wait on nothing.
  const int64_t per = (k_steps + splits - 1) / splits;
  c.splits = int((k_steps + per - 1) / per);
  return c;
}

TensorGemm::Choice TensorGemm::choose(int64_t M, int64_t N, int64_t K, Out out) const {
  const GemmTable &tab = gemm_table(ctx_.compute_capability(), has_wgmma_);
  const GemmPick pick = gemm_pick(tab, M, N, K, int(out));
  if (const int tile = pick.tile ? tile_index(pick.tile) : -1; tile >= 0 && fn_[tile][int(out)])
    return with_splits(tile, M, N, K, out, pick.blocks_per_sm * ctx_.sm_count());
  for (int32_t i = 0; i < tab.n_rules; ++i) {  // (the pick's tile is missing from this image: the rules')
    const GemmRule &r = tab.rules[i];
    if (M > r.max_rows && i + 1 < tab.n_rules) continue;
    const int tile = tile_index(r.tile);
    if (tile < 0 || !fn_[tile][int(out)]) continue;  // (a tile this GPU lacks: the next rule's)
    return with_splits(tile, M, N, K, out, r.blocks_per_sm * ctx_.sm_count());
  }
  return with_splits(tile_index("mma_m128n128"), M, N, K, out, ctx_.sm_count());
}

namespace {

// x (rows, K) or w, bf16 row-major, as a 2-D tensor map with a (64, box_rows) box, 128-byte swizzled.
CUtensorMap tensor_map(CUdeviceptr base, int64_t rows, int64_t K, unsigned box_rows) {
  CUtensorMap m{};
  const unsigned long long dims[2] = {(unsigned long long)K, (unsigned long long)rows};
  const unsigned long long strides[1] = {(unsigned long long)K * 2};
  const unsigned box[2] = {64, box_rows}, elem_strides[2] = {1, 1};
  check(driver().cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void *>(base), dims,
                                        strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled");
  return m;
}

}  // namespace

void TensorGemm::run(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias,
                     CUdeviceptr y, Out out, Choice choice) {
  if (!available_) fail(VT_ERR_INTERNAL, "TensorGemm used without its kernels: " + reason_);
  if (!fits(x, w, K) || M < 0 || N <= 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX ||
      (out == Out::kSwiGLU && (N % 2 != 0 || bias)))
    fail(VT_ERR_INTERNAL, "CUDA op called with bad arguments: tensor-core gemm shape or alignment");
  if (M == 0) return;
  if (choice.tile < 0) choice = choose(M, N, K, out);
  const Tile &t = kTiles[choice.tile];
  const CUfunction f = fn_[choice.tile][int(out)];
  if (!f) fail(VT_ERR_INTERNAL, std::string("tensor-core gemm tile ") + t.name + " is not available on this GPU");
  const int m = int(M), n = int(N), k = int(K);
  const int64_t out_n = out == Out::kSwiGLU ? N / 2 : N, tile_n = out == Out::kSwiGLU ? t.bn / 2 : t.bn;
  const unsigned tiles_n = unsigned((out_n + tile_n - 1) / tile_n), tiles_m = unsigned((M + t.bm - 1) / t.bm);
  const int splits = std::max(1, choice.splits);
  if (splits > 1 &&
      (int64_t(tiles_n) * tiles_m > kTickets ||
       int64_t(tiles_n) * tiles_m * splits * t.acc_threads * t.frag_floats * 4 > int64_t(kSplitBytes)))
    fail(VT_ERR_INTERNAL, "tensor-core gemm: split-K beyond its workspace");
  if (splits > 1 && t.multicast) fail(VT_ERR_INTERNAL, "tensor-core gemm: a multicast tile is never split");
  const CUdeviceptr ws = split_.ptr(), tickets = split_.ptr() + CUdeviceptr(kSplitBytes);
  if (t.wgmma) {
    const CUtensorMap ta = tensor_map(x, M, K, unsigned(t.bm));
    const CUtensorMap tb = tensor_map(w, N, K, unsigned(t.multicast ? t.bn / 2 : tile_n));
    if (t.multicast) {  // persistent pairs: as many as the tile pairs, at most one block per SM
      const int64_t pairs = int64_t(tiles_n) * ((tiles_m + 1) / 2);
      const unsigned grid = 2 * unsigned(std::min<int64_t>(pairs, resident_pairs_[choice.tile]));
      ctx_.launch_cluster(f, {grid}, 2u, {unsigned(t.threads)}, unsigned(t.smem_bytes), s,
                          pdl_wgmma_ && M <= kWgmmaPdlRows, ta, tb, bias, y, m, n, k, splits, ws, tickets);
      return;
    }
    const unsigned grid = unsigned(std::min<int64_t>(int64_t(tiles_n) * tiles_m * splits, ctx_.sm_count()));
    launch(pdl_wgmma_ && M <= kWgmmaPdlRows, f, {grid}, {unsigned(t.threads)}, unsigned(t.smem_bytes), s, ta, tb, bias, y, m, n, k, splits, ws, tickets);
    return;
  }
  launch(pdl_mma_, f, {tiles_n, tiles_m, unsigned(splits)}, {unsigned(t.threads)}, unsigned(t.smem_bytes), s, x, w, bias,
         y, m, n, k, ws, tickets);
}

}  // namespace vt::cuda
