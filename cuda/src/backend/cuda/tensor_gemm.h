// Our tensor-core GEMMs on the host side: the kernels of gemm_mma.cu (mma.sync, every target from sm_80) and
// gemm_wgmma.cu (wgmma + TMA, sm_90a), which tile serves which product (gemm_table.h, measured), split-K's
// workspace, and the launches. y(M, N) = x(M, K) · w(N, K)ᵀ with x and w bf16 and fp32 accumulation; outputs:
//   kBf16   y bf16, + bias(N) fp32 when given;
//   kF32    y fp32, + bias when given (logits; o/down products into the fp32 residual's add);
//   kSwiGLU w is gate|up (2I, K) and y(M, I) bf16 = silu(x·gateᵀ) ⊙ (x·upᵀ); N is 2I; no bias.
// Operands must fit(): K % 8 == 0 and x, w 16-byte aligned (cp.async chunks and TMA's rule); y any alignment.
// Nothing here allocates or synchronizes after construction, so products can be captured into CUDA graphs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/context.h"

namespace vt::cuda {

class TensorGemm {
 public:
  enum class Out : uint8_t { kBf16, kF32, kSwiGLU };

  // A tile configuration, as gemm_mma.cu / gemm_wgmma.cu instantiate it.
  struct Tile {
    const char *name;  // "mma_m128n128": the kernels are vt_gemm_<name>_<bf16|f32|swiglu>
    bool wgmma;
    int bm, bn, bk, threads, smem_bytes;
    int acc_threads, frag_floats;  // threads holding accumulators, and how many each (split-K's workspace per
                                   // (tile, split) is their product in fp32)
    // multicast (wgmma mc_ tiles): blocks in clusters of 2 along M, each pair taking two row tiles of a column and
    // each block fetching half of a weight slice for both; never split
    bool multicast = false;
  };
  static constexpr int kTileCount = 16;
  static const Tile kTiles[kTileCount];
  static int tile_index(const std::string &name);  // -1 when there is none of that name

  // A product's kernel: a tile and its K splits (1: none).
  struct Choice {
    int tile = -1;
    int splits = 1;
  };

  // The split-K partials' budget (fp32) and the tickets; allocated once, zeroed once.
  static constexpr size_t kSplitBytes = size_t(16) << 20;
  static constexpr int kTickets = 4096;
  // The wgmma tiles launch under programmatic dependent launch up to this many rows (decode batches), plainly
  // beyond: on an H100 (session 21) PDL took the 8B's decode at 32 / 64 rows from 0.95 / 0.99x of cuBLASLt to
  // 1.02 / 1.04x, and its prefill of 512 / 2,048 tokens from 0.97 / 0.98x to 0.84 / 0.91x (the mma tiles always).
  static constexpr int64_t kWgmmaPdlRows = 128;
  static constexpr int64_t kWorkspaceBytes = int64_t(kSplitBytes) + kTickets * 4;

  // Looks up the kernels (none missing: a build without them has available() false and reason() says why), raises
  // their shared-memory limits, allocates and zeroes the split-K workspace on `stream`. pdl: launch them with
  // programmatic dependent launch where the context has it (each kernel's first weight slices then load under the
  // previous kernel's tail; false only for the A/B, CudaTuning::gemm_pdl_*), for the mma.sync and the wgmma tiles.
  TensorGemm(Context &ctx, CUstream stream, bool pdl_mma = true, bool pdl_wgmma = true);
  bool available() const { return available_; }
  const std::string &reason() const { return reason_; }
  bool has_wgmma() const { return has_wgmma_; }  // compute capability 9.0 with the sm_90a kernels
  int64_t workspace_bytes() const { return available_ ? kWorkspaceBytes : 0; }

  static bool fits(CUdeviceptr x, CUdeviceptr w, int64_t K) { return K % 8 == 0 && x % 16 == 0 && w % 16 == 0 && K > 0; }

  // The table's tile for this GPU and M, and the splits that fill the GPU (gemm_table.h).
  Choice choose(int64_t M, int64_t N, int64_t K, Out out) const;
  // The splits that bring a tile's work items to `target_blocks` (at least 4 BK steps a split, within the
  // workspace): split-K fills the GPU when a product's tiles alone cannot (batched decode, few columns).
  Choice with_splits(int tile, int64_t M, int64_t N, int64_t K, Out out, int target_blocks) const;

  // Enqueues the product with choose()'s kernel, or with `choice` (the benchmark's and the tests' way to run one
  // tile). Throws vt::Error on bad arguments or a launch failure.
  void run(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias, CUdeviceptr y,
           Out out) {
    run(s, x, M, K, w, N, bias, y, out, Choice{});
  }
  void run(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr bias, CUdeviceptr y,
           Out out, Choice choice);

 private:
  template <class... Args>
  void launch(bool pdl, CUfunction f, Dim3 grid, Dim3 block, unsigned smem, CUstream s, const Args &...args) const {
    if (pdl) ctx_.launch_pdl(f, grid, block, smem, s, args...);
    else ctx_.launch(f, grid, block, smem, s, args...);
  }

  Context &ctx_;
  bool pdl_mma_ = true, pdl_wgmma_ = true;
  bool available_ = false, has_wgmma_ = false;
  std::string reason_;
  CUfunction fn_[kTileCount][3] = {};  // [tile][Out]
  int resident_pairs_[kTileCount] = {};  // multicast tiles: the clusters of 2 the GPU holds at once
  DeviceBuffer split_;                 // partials, then the tickets
};

const char *out_name(TensorGemm::Out o);

}  // namespace vt::cuda
