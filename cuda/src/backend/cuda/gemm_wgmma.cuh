// Tensor-core GEMM on Hopper's warpgroup instructions (sm_90a only: wgmma, TMA, mbarrier), for prefill-sized
// products: y(M, N) = x(M, K) · w(N, K)ᵀ with gemm_mma.cuh's contract and epilogues (bf16 or fp32 y with an fp32
// bias, or SwiGLU over a gate|up weight), K % 8 == 0, x and w 16-byte aligned (the tensor maps' rule).
//
// Structure: a persistent grid (one block per SM, each taking tiles blockIdx.x, + gridDim.x, ...; the tiles of one
// column of y after each other, so a wave shares the weight tiles in L2) of 1 + BM / 64 warpgroups:
//   - warpgroup 0 is the producer: one thread issues the TMA copies of x's (BM x 64) and w's (BN x 64) slices into
//     ST stages of shared memory, 128-byte swizzled, each completing on the stage's `full` mbarrier, and waits on
//     the stage's `empty` mbarrier before refilling it; it runs ahead into the next tile while the consumers store;
//   - each consumer warpgroup multiplies its 64 rows against the BN columns with wgmma m64nBNk16 (A and B from
//     shared memory through descriptors), one commit group per stage, keeping one group in flight: a stage is
//     released once the group after it has been issued and the one reading it has completed;
//   - or, pingpong (WgTile's kPingpong), two consumers take alternate tiles whole, and hand the main loop to each
//     other through named barriers: while one stores its tile, the other's products keep the tensor cores busy
//     (the cooperative tiles leave them idle during the epilogue, which short K makes a large share);
//   - the epilogue stores straight from the accumulators (fragment rows g and g + 8 of each warp's 16, column
//     pairs 2t, 2t + 1 of each n8 block), as gemm_mma.cuh does;
//   - split-K (splits > 1), for products whose tiles cannot fill the GPU (few rows: batched decode; few columns):
//     the work items are (tile, split) pairs, and the splits meet as gemm_mma.cuh's do (workspace, tickets);
//   - or, multicast (WgTile's kMulticast), blocks work in clusters of two along M: the pair takes two row tiles of
//     one column of y at once, and each block fetches half of the stage's weight rows and multicasts it into both
//     blocks' shared memory, so a weight slice crosses L2 once per pair (prefill, where L2 -> SM traffic, not
//     DRAM, can set the pace: a 128 x 256 tile reads 85 FLOP per byte alone, 128 with its pair). A stage is free
//     again once both blocks' consumers released it: each consumer arrives on its own block's `empty` barrier and
//     on the peer's.
// With two consumers the producer gives registers to them (setmaxnreg: 40 and 232), so the 128 fp32 accumulators
// of BN = 256 fit without spilling. Rows and columns past the edges: TMA fills zeros, the stores skip them.
// SwiGLU: the stage's B tile is two TMA boxes, BN / 2 gate rows and the same BN / 2 up rows, so a thread holds
// the gate sum of an output in n8 block j and its up sum in block j + BN / 16.
#pragma once

#include "common.cuh"
#include "gemm_mma.cuh"  // store_pair, swiglu
#include "tensor_core.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VT_SM90A 1
#else
#define VT_SM90A 0
#endif

namespace vtk {

// A CUtensorMap (driver.h), passed by value as a __grid_constant__ parameter: TMA reads it from parameter memory.
struct alignas(64) TmaDesc {
  unsigned long long q[16];
};

// kPingpong false: the consumers share each tile (cooperative), one 64-row slice each. true: two consumers, each
// taking every other tile whole (BM rows: BM / 64 wgmma row blocks), their main loops in turn (a named-barrier
// hand-off) so one's epilogue runs under the other's products.
template <int BM_, int BN_, int ST_, bool kPingpong_ = false, bool kMulticast_ = false>
struct WgTile {
  static constexpr int BM = BM_, BN = BN_, BK = 64, ST = ST_;
  static constexpr bool kPingpong = kPingpong_, kMulticast = kMulticast_;
  static constexpr int kConsumers = kPingpong ? 2 : BM / 64;
  static constexpr int kSub = kPingpong ? BM / 64 : 1;          // 64-row blocks a consumer multiplies per tile
  static constexpr int kAccThreads = kPingpong ? 128 : kConsumers * 128;  // threads holding one tile's sums
  static constexpr int kAcc = kSub * BN / 2;                    // and how many each holds
  static constexpr int kThreads = (kConsumers + 1) * 128;
  static constexpr int kABytes = BM * BK * 2, kBBytes = BN * BK * 2, kStageBytes = kABytes + kBBytes;
  // the stages, their 2 ST barriers, and the slack to align the first stage to 1024 bytes (the swizzle atom)
  static constexpr int kSmemBytes = ST * kStageBytes + 2 * ST * 8 + 1024;
  static_assert(BM % 64 == 0 && BM <= 128 && (BN == 128 || BN == 256) && kAcc <= 128, "tile geometry");
};

#if VT_SM90A
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// A (64-element, rows) box of the tensor `map` at (k, row) into dst, completing `bytes` on bar.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDesc *map, uint32_t bar, int k, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(bar)
      : "memory");
}
// The same box into dst at the same offset in every block of the cluster in `mask`, completing its bytes on each
// one's barrier at bar's offset.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const TmaDesc *map, uint32_t bar, int k, int row,
                                                      uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(bar), "h"(mask)
      : "memory");
}
// An arrival on a peer block's barrier (addr: mapa's shared::cluster address of it).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(addr) : "memory");
}
// The shared-memory matrix descriptor of a K-major tile of 128-byte rows, 128-byte swizzled (as TMA wrote it): rows
// 8 apart are 1024 bytes apart; the start moves by 32 bytes per 16-element k step inside the swizzle atom.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from touching an accumulator between the asynchronous product and its wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma m64nNk16, bf16 inputs, fp32 accumulators d (N / 2 per thread) += A (desc_a) · B (desc_b), both K-major.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// The cluster's barrier (every thread of every block arrives; release / acquire order the shared-memory writes
// before it against the peers' reads after it; not .aligned: the producer's threads arrive from divergent code)
// and the shared::cluster address of a peer block's shared memory at addr's offset.
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ uint32_t peer_smem(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

template <int BN>
__device__ __forceinline__ void wgmma_bn(float (&d)[BN / 2], uint64_t a, uint64_t b) {
  if constexpr (BN == 256) wgmma_m64n256k16(d, a, b);
  else wgmma_m64n128k16(d, a, b);
}
#endif  // VT_SM90A

// splits > 1: split-K as gemm_mma.cuh's (each split's accumulators to ws at (tile, split, consumer thread), the
// last split of a tile adds them up in split order and stores); ws and tickets are unused otherwise.
template <class C, class Y, bool kSwiGLU>
__device__ __forceinline__ void gemm_wgmma(const TmaDesc &ta, const TmaDesc &tb, const float *__restrict__ bias,
                                           Y *__restrict__ y, int M, int N, int K, int splits,
                                           float *__restrict__ ws, int *__restrict__ tickets) {
#if VT_SM90A
  extern __shared__ uint8_t wg_smem[];
  __shared__ int last_split[2];  // per consumer (pingpong), [0] otherwise
  const uint32_t raw = smem_addr(wg_smem), base = (raw + 1023u) & ~1023u;
  const uint32_t full0 = base + C::ST * C::kStageBytes, empty0 = full0 + C::ST * 8;
  const int wg = threadIdx.x / 128;
  const int out_n = kSwiGLU ? N / 2 : N, tile_n = kSwiGLU ? C::BN / 2 : C::BN;
  const int tiles_m = (M + C::BM - 1) / C::BM, tiles_n = (out_n + tile_n - 1) / tile_n;
  const int kb_all = (K + C::BK - 1) / C::BK, kb_per = (kb_all + splits - 1) / splits;
  // Work items: (tile, split), a tile's splits next to each other so they run at the same time. Multicast: a work
  // item is a pair of row tiles (rank 0 the upper, 1 the lower; past M, TMA reads zeros and nothing is stored),
  // each pair of blocks taking the same items in the same order.
  constexpr int kPair = C::kMulticast ? 2 : 1;
  // (the cluster is (2, 1, 1): a block's rank in it is blockIdx.x % 2, a register the compiler can re-read)
  const int rank = C::kMulticast ? int(blockIdx.x & 1) : 0;
  const int first = blockIdx.x / kPair, stride = gridDim.x / kPair;
  const int units_m = (tiles_m + kPair - 1) / kPair;
  const int n_work = units_m * tiles_n * splits;
  auto row_of = [&](int tile) { return ((tile % units_m) * kPair + rank) * C::BM; };
  auto col_of = [&](int tile) { return (tile / units_m) * tile_n; };
  auto a_stage = [&](int s) { return base + uint32_t(s * C::kABytes); };
  auto b_stage = [&](int s) { return base + uint32_t(C::ST * C::kABytes + s * C::kBBytes); };

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::ST; ++s)
      mbar_init(full0 + 8 * s, 1), mbar_init(empty0 + 8 * s, (C::kPingpong ? 1 : C::kConsumers) * 4 * kPair);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if constexpr (C::kMulticast) cluster_sync_all();  // (the peer's barriers exist before anything is sent to them)

  if (wg == 0) {
    if constexpr (C::kConsumers == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&ta)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tb)) : "memory");
      auto load_b = [&](int s, int kb, int col0) {
        const uint32_t full = full0 + 8 * s;
        if constexpr (C::kMulticast) {  // this rank's half of the rows (SwiGLU: gate or up), into both blocks
          const int row = kSwiGLU ? rank * (N / 2) + col0 : col0 + rank * (C::BN / 2);
          tma_load_2d_multicast(b_stage(s) + uint32_t(rank * (C::kBBytes / 2)), &tb, full, kb * C::BK, row, 0x3);
        } else if constexpr (kSwiGLU) {
          tma_load_2d(b_stage(s), &tb, full, kb * C::BK, col0);
          tma_load_2d(b_stage(s) + C::kBBytes / 2, &tb, full, kb * C::BK, N / 2 + col0);
        } else {
          tma_load_2d(b_stage(s), &tb, full, kb * C::BK, col0);
        }
      };
      // Under programmatic dependent launch the first work item's first ST weight slices are requested before the
      // wait (weights are no kernel's output), each stage expecting its whole bytes, so its x slice completes it
      // after the wait: they stream in under the previous kernel's tail.
      int early = 0;
      if (first < n_work) {
        const int z = first % splits, col0 = col_of(first / splits);
        early = max(0, min(C::ST, min(kb_all, (z + 1) * kb_per) - z * kb_per));
        for (int s = 0; s < early; ++s) {
          mbar_expect_tx(full0 + 8 * s, C::kStageBytes);
          load_b(s, z * kb_per + s, col0);
        }
      }
      pdl_wait();
      int it = 0;
      for (int work = first; work < n_work; work += stride) {
        // The dependents may launch once every block has begun its last work item: as the grid drains (at decode a
        // block has one item, so at once), not while a persistent grid still has a prompt's tiles to go.
        if (work + stride >= n_work) pdl_trigger();
        const int tile = work / splits, z = work % splits;
        const int row0 = row_of(tile), col0 = col_of(tile);
        const int kb1 = min(kb_all, (z + 1) * kb_per);
        for (int kb = z * kb_per; kb < kb1; ++kb, ++it) {
          const int s = it % C::ST;
          const uint32_t full = full0 + 8 * s;
          if (it >= early) {  // (the early stages are expecting their bytes and hold their weight slice)
            mbar_wait(empty0 + 8 * s, ((it / C::ST) & 1) ^ 1);
            mbar_expect_tx(full, C::kStageBytes);
            load_b(s, kb, col0);
          }
          tma_load_2d(a_stage(s), &ta, full, kb * C::BK, row0);
        }
      }
    }
    // (the producer's threads meet the consumers' cluster barrier too: every thread of the cluster arrives)
    if constexpr (C::kMulticast) cluster_sync_all();
    return;
  }
  if constexpr (C::kConsumers == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  pdl_wait();  // (before the workspace, the tickets and y; what they multiply is in shared memory)
  const int c = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int ct = C::kPingpong ? threadIdx.x % 128 : threadIdx.x - 128;  // among the threads holding a tile's sums
  const int ls = C::kPingpong ? c : 0;
  // Named barriers: 1 and 2 pass the main loop from one pingpong consumer to the other (128 arrive, 128 sync);
  // 3 (+ c when pingpong) gathers the threads of a tile's sums for split-K's ticket.
  const int split_bar = 3 + ls;
  float acc[C::kSub][C::BN / 2];
  int it = 0, j = 0;
  // A stage read: released to this block's producer, and with multicast to the peer's, which writes into it too.
  auto release = [&](int s) {
    if (lane != 0) return;
    mbar_arrive(empty0 + 8 * s);
    if constexpr (C::kMulticast) mbar_arrive_cluster(peer_smem(empty0 + 8 * s, uint32_t(rank ^ 1)));
  };
  for (int work = first; work < n_work; work += stride, ++j) {
    const int tile = work / splits, z = work % splits;
    const int row0 = row_of(tile), col0 = col_of(tile);
    const int kb0 = z * kb_per, nkb = max(0, min(kb_all, kb0 + kb_per) - kb0);
    if (C::kPingpong && (j & 1) != c) {  // the other consumer's tile: its stages go by
      it += nkb;
      continue;
    }
    // Pingpong: this main loop starts once the other consumer's has finished (it waited on every stage of the
    // tile before this one, so the stages' barriers are at most one phase behind this loop's waits).
    if (C::kPingpong && j > 0) asm volatile("bar.sync %0, 256;" ::"r"(1 + (c ^ 1)) : "memory");
#pragma unroll
    for (int u = 0; u < C::kSub; ++u)
#pragma unroll
      for (int i = 0; i < C::BN / 2; ++i) acc[u][i] = 0.f;
    int prev = 0;
    for (int kb = 0; kb < nkb; ++kb, ++it) {
      const int s = it % C::ST;
      mbar_wait(full0 + 8 * s, (it / C::ST) & 1);
      wgmma_fence();
      const uint32_t b = b_stage(s);
#pragma unroll
      for (int kk = 0; kk < C::BK / 16; ++kk)
#pragma unroll
        for (int u = 0; u < C::kSub; ++u) {
          const uint32_t a = a_stage(s) + uint32_t((C::kPingpong ? u : c) * 64 * 128);
          wgmma_bn<C::BN>(acc[u], desc_sw128(a + 32 * kk), desc_sw128(b + 32 * kk));
        }
      wgmma_commit();
      if (kb > 0) {
        wgmma_wait<1>();
        release(prev);
      }
      prev = s;
    }
    wgmma_wait<0>();
#pragma unroll
    for (int u = 0; u < C::kSub; ++u) fence_regs(acc[u]);
    if (nkb > 0) release(prev);
    if (C::kPingpong && work + stride < n_work) asm volatile("bar.arrive %0, 256;" ::"r"(1 + c) : "memory");

    if (splits > 1) {
      // (at (float4, thread) in the (tile, split)'s block, as gemm_mma.cuh's: a warp's accesses are contiguous)
      // A thread's float4s hold rows g and g + 8 of its warp's 16: none of them live past M (few rows: batched
      // decode) means nothing to write or read, which at 8 rows of a 64-row tile is 7 / 8 of the partials.
      float4 *mine = reinterpret_cast<float4 *>(ws) + (long long)(tile * splits + z) * C::kAccThreads * (C::kAcc / 4) + ct;
      // (row block u is live while u * 64 < live_rows; m128n256 has no registers to spare for it: its SwiGLU
      // spilled, and it serves products of 128 rows and more, where every row is live)
      constexpr bool kLiveCheck = !(C::BM == 128 && C::BN == 256);
      const int live_rows = M - row0 - warp * 16 - g;
#pragma unroll
      for (int u = 0; u < C::kSub; ++u)
#pragma unroll
        for (int i = 0; i < C::BN / 8; ++i)
          if (!kLiveCheck || (C::kPingpong ? u : c) * 64 < live_rows)
            __stcg(mine + (u * (C::BN / 8) + i) * C::kAccThreads,
                 make_float4(acc[u][4 * i], acc[u][4 * i + 1], acc[u][4 * i + 2], acc[u][4 * i + 3]));
      asm volatile("bar.sync %0, %1;" ::"r"(split_bar), "r"(C::kAccThreads) : "memory");
      if (ct == 0) last_split[ls] = split_ticket(tickets + tile) == splits - 1;
      asm volatile("bar.sync %0, %1;" ::"r"(split_bar), "r"(C::kAccThreads) : "memory");
      if (!last_split[ls]) continue;
#pragma unroll
      for (int u = 0; u < C::kSub; ++u)
#pragma unroll
        for (int i = 0; i < C::BN / 2; ++i) acc[u][i] = 0.f;
      for (int sp = 0; sp < splits; ++sp) {
        const float4 *part = reinterpret_cast<const float4 *>(ws) + (long long)(tile * splits + sp) * C::kAccThreads * (C::kAcc / 4) + ct;
#pragma unroll
        for (int u = 0; u < C::kSub; ++u)
#pragma unroll
          for (int i = 0; i < C::BN / 8; ++i) {
            if (kLiveCheck && (C::kPingpong ? u : c) * 64 >= live_rows) continue;
            const float4 p = __ldcg(part + (u * (C::BN / 8) + i) * C::kAccThreads);
            acc[u][4 * i] += p.x, acc[u][4 * i + 1] += p.y, acc[u][4 * i + 2] += p.z, acc[u][4 * i + 3] += p.w;
          }
      }
      if (ct == 0) tickets[tile] = 0;
    }

#pragma unroll
    for (int u = 0; u < C::kSub; ++u) {
      const int r0 = row0 + (C::kPingpong ? u : c) * 64 + warp * 16 + g;
      if constexpr (kSwiGLU) {
        const int I = N / 2;
#pragma unroll
        for (int jn = 0; jn < C::BN / 16; ++jn) {
          const int col = col0 + 8 * jn + 2 * t;
          if (col >= I) continue;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = r0 + 8 * h;
            if (row >= M) continue;
            float v[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) v[e] = swiglu(acc[u][4 * jn + 2 * h + e], acc[u][4 * (jn + C::BN / 16) + 2 * h + e]);
            store_pair(y, (long long)row * I + col, col + 1 < I, (I & 1) == 0 && col + 1 < I, v[0], v[1]);
          }
        }
      } else {
#pragma unroll
        for (int jn = 0; jn < C::BN / 8; ++jn) {
          const int col = col0 + 8 * jn + 2 * t;
          if (col >= N) continue;
          const float b0 = bias ? bias[col] : 0.f, b1 = bias && col + 1 < N ? bias[col + 1] : 0.f;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = r0 + 8 * h;
            if (row < M)
              store_pair(y, (long long)row * N + col, col + 1 < N, (N & 1) == 0 && col + 1 < N,
                         acc[u][4 * jn + 2 * h] + b0, acc[u][4 * jn + 2 * h + 1] + b1);
          }
        }
      }
    }
  }
  // Multicast: no block leaves while its peer may still arrive on its barriers (the last stages' releases).
  if constexpr (C::kMulticast) cluster_sync_all();
#endif  // VT_SM90A
}

}  // namespace vtk
