// The warp-level tensor-core and async-copy instructions (sm_80 and newer) that the attention and GEMM kernels
// share: mma.sync m16n8k16 on bf16, ldmatrix, movmatrix, cp.async with zero fill, and bf16 packing.
//
// Fragment layout of mma.sync m16n8k16 (g = lane / 4, t = lane % 4), which every caller relies on:
//   A (16 x 16, row-major): a0 (row g, cols 2t, 2t+1), a1 (row g+8, same cols), a2 (row g, cols 2t+8, 2t+9), a3 (row g+8)
//   B (16 x 8, k x n):      b0 (k 2t, 2t+1 of col g), b1 (k 2t+8, 2t+9 of col g)
//   C/D (16 x 8, fp32):     d0, d1 (row g, cols 2t, 2t+1), d2, d3 (row g+8, cols 2t, 2t+1)
#pragma once

#include "common.cuh"

namespace vtk {

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Transposes the 8x8 bf16 tile whose fragment (row lane / 4, columns 2 * (lane % 4) + {0, 1}) each lane holds.
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// (lo, hi) rounded to nearest-even bf16, lo in the low half (the lower column of a fragment).
__device__ __forceinline__ uint32_t bf16x2_from_f32(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float bf16x2_lo(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float bf16x2_hi(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }

// d += a · b, fragments as above. Not volatile (unlike mma_bf16_16816, which the split-K attention keeps in
// program order): the compiler may interleave these with the loads that feed the next ones.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Four 8x8 b16 matrices from shared memory: lanes 8j .. 8j + 7 give the row addresses of matrix j (addr, a shared
// address), and register j of each lane receives matrix j's fragment (row lane / 4, columns 2 * (lane % 4) + {0,
// 1}); .trans gives the transposed fragments. The memory clobber keeps the compiler from moving a shared-memory read
// across the barriers around it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// 16 bytes global -> shared (dst a shared address) without passing through registers, kept out of L1 (.cg: tiles
// are read once per block). cp_async16_zfill: when !valid the 16 bytes are zero-filled and nothing is read (`src`
// must still be a mapped address: callers pass the tensor's base).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Split-K's ticket: once every thread holding the tile's sums has stored its partials and met the others at a
// barrier, one thread takes the ticket with an acquire-release atomic at GPU scope. Release is cumulative over the
// stores the barrier ordered before it, and the barrier after it carries the acquire to the block, so the split
// that draws splits - 1 sees every split's partials (the pattern of CUTLASS's semaphore). In place of a
// __threadfence in every thread: a fence.sc per warp, which ncu showed the split-K kernels stalled on.
__device__ __forceinline__ int split_ticket(int *ticket) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(ticket) : "memory");
  return old;
}

}  // namespace vtk
