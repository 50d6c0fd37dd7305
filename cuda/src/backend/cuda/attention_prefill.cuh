// Prefill attention on tensor cores, flash-attention-2 style: bf16 q and paged K/V cache, fp32 softmax and
// accumulation, bf16 out, with the contract of cpu::attention (cpu_ops.h; attention.cuh restates it). Used for
// head_dim 64, 128 and 256 (template instances); other head dims and fp32 activations keep attention.cuh's kernel.
// head_dim 256 (Qwen3.5's gated attention) would not fit the registers as the others run (a warp's Q fragments, 64
// registers a thread, beside 128 of output): there Q stays in shared memory of its own and each key tile reads its
// fragments again, and the key tiles are 32 keys (PrefillGeometry).
//
// Work split: the host cuts every sequence's query rows into tiles of at most kPrefillRows rows (never across
// two sequences) and passes the list, int32 (seq, first row, rows) per tile (Ops::prefill_tiles). One CTA of
// 4 warps runs one (tile, q head); warp w owns the tile's rows 16w .. 16w + 15 for the whole kernel, so the
// softmax state of a row never leaves its warp. The CTA walks the keys 0 .. (position of its last row) in
// tiles of kKeys (64; 32 for head_dim 256), gathered from the paged cache through the block table with cp.async into shared
// memory, two stages: tile j + 1 is in flight while tile j is computed. Keys past the tile's last position and
// q rows past the tile's end are zero-filled, never read: the cache outside the batch's keys may hold anything
// (NaN in the tests), and a zero V row times a zero probability stays 0 where NaN would not. Per key tile:
//   S = Q Kᵀ (mma), causal mask (only where some key lies past the first row's position), online softmax in
//   the log2 domain (scale * log2(e) folded into one FMA before exp2), O = O * alpha + P V (mma, P rounded to
//   bf16 as the tensor cores take it; the row sums l stay fp32).
// Every row sees key 0 and the first key tile holds it, so the running max is finite from the first tile on
// and no -inf - -inf arises.
//
// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16" with
// .bf16), g = lane / 4, t = lane % 4; a .b32 register holds two bf16, the lower column / k index in the low half:
//   A (16 x 16, row major) a0: (row g,     cols 2t, 2t+1)   a1: (row g + 8, cols 2t, 2t+1)
//                          a2: (row g,     cols 2t+8, 2t+9) a3: (row g + 8, cols 2t+8, 2t+9)
//   B (16 x 8, k x n)      b0: (k 2t, 2t+1, col g)          b1: (k 2t+8, 2t+9, col g)
//   C (16 x 8, fp32)       c0, c1: (row g, cols 2t, 2t+1)   c2, c3: (row g + 8, cols 2t, 2t+1)
// ldmatrix.m8n8.x4: lanes 8i .. 8i+7 give the row addresses of matrix i, and register i receives matrix i's
// (row g, cols 2t, 2t+1); with .trans, its (rows 2t, 2t+1, col g). So:
//   - Q (rows x dims, row major in smem) is A as stored: matrices (rows 0-7 | 8-15) x (dims 0-7 | 8-15);
//   - K (keys x dims in smem) is B for S = Q Kᵀ as stored (n = key, k = dim): one x4 gives two 8-key n tiles;
//   - V (keys x dims in smem) is B for O = P V (k = key, n = dim) through .trans: one x4 gives two 8-dim n tiles;
//   - the C fragments of S for keys 16c .. 16c + 15 (n tiles 2c, 2c + 1) are, packed pairwise to bf16, exactly
//     the A fragment of P for that k chunk: a0 = S[2c](c0,c1), a1 = S[2c](c2,c3), a2 = S[2c+1](c0,c1), a3 =
//     S[2c+1](c2,c3).
// Shared memory rows are padded to D + 8 bf16 (16 bytes more than a multiple of 128): the 8 rows that one
// ldmatrix phase reads then start in 8 different 16-byte bank groups, and so do cp.async's 16-byte writes.
#pragma once

#include "common.cuh"
#include "tensor_core.cuh"

namespace vtk {

constexpr int kPrefillRows = 64;   // query rows per tile; Ops::kPrefillTileRows must match
constexpr int kPrefillWarps = 4;   // 16 query rows each
constexpr int kPrefillThreads = kPrefillWarps * 32;

// Per head_dim: keys per K/V tile, and whether Q lives in shared memory for the whole kernel (head_dim 256) or
// in registers after the first tile (Q then sits in K's second stage until it is read).
template <int D>
struct PrefillGeometry {
  static constexpr bool kQShared = D > 128;
  static constexpr int kKeys = kQShared ? 32 : 64;
};

// Dynamic shared memory: K and V, two stages each, of kKeys rows of D + 8 bf16, and Q's kPrefillRows rows where it
// has its own (the output goes through K's stages at the end: 2 kKeys >= 64 rows). cuda_ops.cpp restates it.
constexpr int prefill_smem_bytes(int D) {
  return (4 * (D > 128 ? 32 : 64) + (D > 128 ? kPrefillRows : 0)) * (D + 8) * 2;
}

// 2^x; 2^-inf = +0, which is what masked keys and the first tile's rescale (m = -inf) rely on.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One (tile, q head): blockIdx.x is the head, blockIdx.y the tile. q rows q_stride elements apart; caches
// (n_blocks, block_size, n_kv_heads, D); out (T, n_heads, D). scale_log2 = scale * log2(e), > 0.
template <int D>
__device__ __forceinline__ void attention_prefill_tile(const bf16 *__restrict__ q, long long q_stride,
                                                       const bf16 *__restrict__ k_cache,
                                                       const bf16 *__restrict__ v_cache,
                                                       const int32_t *__restrict__ seq_q_start,
                                                       const int32_t *__restrict__ seq_pos0,
                                                       const int32_t *__restrict__ block_tables, int max_blocks,
                                                       int block_size, int n_heads, int n_kv_heads, float scale_log2,
                                                       const int32_t *__restrict__ tiles, bf16 *__restrict__ out) {
  using G = PrefillGeometry<D>;
  constexpr int kKeys = G::kKeys;                      // keys per K/V tile
  constexpr int kStride = D + 8;                       // bf16 per shared-memory row
  constexpr int kTile = kKeys * kStride;               // bf16 per stage of K or V
  constexpr int kChunks = D / 8;                       // 16-byte chunks per row
  constexpr int kRowsPerPass = kPrefillThreads / kChunks;
  constexpr int kPasses = kKeys / kRowsPerPass;        // K / V rows each thread copies per tile
  constexpr int kQPasses = kPrefillRows / kRowsPerPass;  // and Q rows, once
  static_assert(D % 16 == 0 && kPrefillThreads % kChunks == 0 && kKeys % kRowsPerPass == 0,
                "the copies cover whole rows");
  static_assert(G::kQShared || kPrefillRows == kKeys, "Q is staged in a K stage");
  static_assert(2 * kKeys >= kPrefillRows, "the output rows fit K's two stages");
  extern __shared__ uint4 smem_raw[];
  bf16 *const sk = reinterpret_cast<bf16 *>(smem_raw);  // [2][kKeys][kStride]
  bf16 *const sv = sk + 2 * kTile;                      // [2][kKeys][kStride]
  // Q: its own rows after V's (head_dim 256), or K's second stage until the first tile has been read
  bf16 *const sq = G::kQShared ? sv + 2 * kTile : sk + kTile;

  const int h = blockIdx.x;
  const int32_t *tile = tiles + 3 * int64_t(blockIdx.y);
  const int s = tile[0], row0 = tile[1], n_rows = tile[2];
  const int first = seq_pos0[s] + (row0 - seq_q_start[s]);  // position of the tile's first row
  const int n_keys = first + n_rows;                        // the last row sees keys 0 .. n_keys - 1
  const int n_kt = (n_keys + kKeys - 1) / kKeys;
  const int kvh = h / (n_heads / n_kv_heads);
  const int32_t *table = block_tables + int64_t(s) * max_blocks;
  const int64_t slot_stride = int64_t(n_kv_heads) * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // Copies: thread tid moves the 16-byte column c8 of rows r_first + kRowsPerPass * u, so each pass of the
  // CTA covers kRowsPerPass whole rows.
  const int c8 = (tid % kChunks) * 8, r_first = tid / kChunks;

#pragma unroll
  for (int u = 0; u < kQPasses; ++u) {
    const int r = r_first + u * kRowsPerPass;
    bf16 *dst = sq + r * kStride + c8;
    if (r < n_rows)
      cp_async16(smem_addr(dst), q + int64_t(row0 + r) * q_stride + int64_t(h) * D + c8);
    else
      *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
  }
  auto load_kv = [&](int kt, int stage) {
    const int kb = kt * kKeys;
#pragma unroll
    for (int u = 0; u < kPasses; ++u) {
      const int r = r_first + u * kRowsPerPass, p = kb + r;
      bf16 *dk = sk + stage * kTile + r * kStride + c8, *dv = sv + stage * kTile + r * kStride + c8;
      if (p < n_keys) {
        const int64_t off = (int64_t(table[p / block_size]) * block_size + p % block_size) * slot_stride +
                            int64_t(kvh) * D + c8;
        cp_async16(smem_addr(dk), k_cache + off);
        cp_async16(smem_addr(dv), v_cache + off);
      } else {
        *reinterpret_cast<uint4 *>(dk) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4 *>(dv) = make_uint4(0, 0, 0, 0);
      }
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  // this warp's 16 Q rows as A fragments, one per 16-dim chunk (head_dim 256: read from shared memory per use)
  uint32_t qf[G::kQShared ? 1 : D / 16][4];
  float o[D / 8][4];       // unnormalised output, C fragments, one per 8-dim tile
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // rows g and g + 8 (log2 domain; l: this lane's part)

  for (int kt = 0; kt < n_kt; ++kt) {
    cp_async_wait_all();  // tile kt (and at kt = 0 Q) has landed for this thread's copies...
    __syncthreads();      // ...and everyone's; every warp is also done with tile kt - 1's stage
    if constexpr (!G::kQShared) {
      if (kt == 0) {
#pragma unroll
        for (int kc = 0; kc < D / 16; ++kc)
          ldmatrix_x4(qf[kc], smem_addr(sq + (16 * warp + (lane & 15)) * kStride + 16 * kc + (lane >> 4) * 8));
        __syncthreads();  // Q's stage is tile 1's
      }
    }
    if (kt + 1 < n_kt) {
      load_kv(kt + 1, (kt + 1) & 1);
      cp_async_commit();
    }
    const bf16 *ks = sk + (kt & 1) * kTile, *vs = sv + (kt & 1) * kTile;

    float sc[kKeys / 8][4];  // S for this warp's rows, one C fragment per 8 keys
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      if constexpr (G::kQShared)
        ldmatrix_x4(qf[0], smem_addr(sq + (16 * warp + (lane & 15)) * kStride + 16 * kc + (lane >> 4) * 8));
      const uint32_t(&a)[4] = qf[G::kQShared ? 0 : kc];
#pragma unroll
      for (int np = 0; np < kKeys / 16; ++np) {
        uint32_t b[4];  // keys 16np + (0-7 | 8-15) x dims 16kc + (0-7 | 8-15)
        ldmatrix_x4(b, smem_addr(ks + (16 * np + (lane & 7) + (lane >> 4) * 8) * kStride + 16 * kc +
                                 ((lane >> 3) & 1) * 8));
        mma_bf16(sc[2 * np], a, b[0], b[1]);
        mma_bf16(sc[2 * np + 1], a, b[2], b[3]);
      }
    }

    const int kb = kt * kKeys;
    if (kb + kKeys - 1 > first) {
      // Row r sees key p iff p <= first + r; lim is that bound relative to kb. Keys past n_keys (zero-filled)
      // always fall past it for the tile's real rows.
      const int lim0 = first - kb + 16 * warp + g, lim1 = lim0 + 8;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        const int c = 8 * n + 2 * t;
        if (c > lim0) sc[n][0] = -INFINITY;
        if (c + 1 > lim0) sc[n][1] = -INFINITY;
        if (c > lim1) sc[n][2] = -INFINITY;
        if (c + 1 > lim1) sc[n][3] = -INFINITY;
      }
    }

    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      mx0 = fmaxf(mx0, fmaxf(sc[n][0], sc[n][1]));
      mx1 = fmaxf(mx1, fmaxf(sc[n][2], sc[n][3]));
    }
    // The 4 lanes of a quad hold one row's kKeys scores.
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0 * scale_log2), mn1 = fmaxf(m1, mx1 * scale_log2);  // scale > 0: max commutes
    const float alpha0 = exp2_approx(m0 - mn0), alpha1 = exp2_approx(m1 - mn1);
    m0 = mn0, m1 = mn1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      sc[n][0] = exp2_approx(fmaf(sc[n][0], scale_log2, -mn0));
      sc[n][1] = exp2_approx(fmaf(sc[n][1], scale_log2, -mn0));
      sc[n][2] = exp2_approx(fmaf(sc[n][2], scale_log2, -mn1));
      sc[n][3] = exp2_approx(fmaf(sc[n][3], scale_log2, -mn1));
      rs0 += sc[n][0] + sc[n][1];
      rs1 += sc[n][2] + sc[n][3];
    }
    l0 = l0 * alpha0 + rs0;
    l1 = l1 * alpha1 + rs1;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[i][0] *= alpha0, o[i][1] *= alpha0, o[i][2] *= alpha1, o[i][3] *= alpha1;

#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      const uint32_t pa[4] = {bf16x2_from_f32(sc[2 * kc][0], sc[2 * kc][1]), bf16x2_from_f32(sc[2 * kc][2], sc[2 * kc][3]),
                              bf16x2_from_f32(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
                              bf16x2_from_f32(sc[2 * kc + 1][2], sc[2 * kc + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];  // keys 16kc + (0-7 | 8-15) x dims 16dp + (0-7 | 8-15), transposed
        ldmatrix_x4_trans(b, smem_addr(vs + (16 * kc + (lane & 15)) * kStride + 16 * dp + (lane >> 4) * 8));
        mma_bf16(o[2 * dp], pa, b[0], b[1]);
        mma_bf16(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
  }

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.f / l0, inv1 = 1.f / l1;  // l >= 1: the row's max contributes 2^0

  // Through shared memory, so that each output row leaves as 16-byte stores.
  __syncthreads();  // every warp is done with the K/V stages
  bf16 *const so = sk + 16 * warp * kStride;  // this warp's 16 rows
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    *reinterpret_cast<uint32_t *>(so + g * kStride + 8 * i + 2 * t) = bf16x2_from_f32(o[i][0] * inv0, o[i][1] * inv0);
    *reinterpret_cast<uint32_t *>(so + (g + 8) * kStride + 8 * i + 2 * t) =
        bf16x2_from_f32(o[i][2] * inv1, o[i][3] * inv1);
  }
  __syncwarp();
  for (int i = lane; i < 16 * kChunks; i += 32) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    if (16 * warp + r < n_rows)
      *reinterpret_cast<uint4 *>(out + (int64_t(row0 + 16 * warp + r) * n_heads + h) * D + c) =
          *reinterpret_cast<const uint4 *>(so + r * kStride + c);
  }
}

}  // namespace vtk
