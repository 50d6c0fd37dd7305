// Kernels of bench/cuda-sync.cpp (an experiment: --experiments builds only), which measures what one dependency
// between two steps of the decode costs on the GPU, two ways:
//   vt_bench_chain_step(src, dst): one step as its own launch (the engine today: each op a kernel, PDL between
//     them, captured in a graph): every block reads a value another block wrote in the step before;
//   vt_bench_barrier_steps(a, b, arrive, gen, n): n such steps in one persistent kernel, a grid-wide barrier
//     between them (what a persistent decode kernel would pay instead of a launch boundary).
// Grid: G blocks of 256 threads; buffers of G floats. After n steps from zeros every slot holds n, whichever way:
// the host checks it, so a barrier that lets a block read a stale value shows as a wrong count.
#include "common.cuh"

#if VT_CUDA_EXPERIMENTS
using namespace vtk;

namespace {

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A barrier across the whole grid, for persistent kernels whose blocks are all resident at once (the host sizes
// the grid from the occupancy; bench/cuda-sync.cpp measures what one costs). arrive and gen: two words in global
// memory, zero before the first use, left ready for the next (the last block resets arrive). The generation is
// read before arriving, so a last block that arrives and bumps it first cannot be missed; the fences order each
// block's writes before its arrival, and the reset before the release. Every thread of every block calls it.
// (It served the MLP block, a persistent kernel shelved at 0.78x in session 6: bench/RESULTS.md.)
__device__ __forceinline__ void grid_barrier(unsigned *arrive, unsigned *gen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned g = ld_acquire_gpu(gen);
    __threadfence();
    if (atomicAdd(arrive, 1u) == gridDim.x - 1) {
      *arrive = 0;
      __threadfence();
      atomicAdd(gen, 1u);
    } else {
      while (ld_acquire_gpu(gen) == g) {
      }
    }
  }
  __syncthreads();
}

// One dependent step: block b reads slot (b + 1) mod G of the previous step's values through L2 (another
// block wrote it) and writes its own slot, plus one.
__device__ __forceinline__ void step(const float *src, float *dst) {
  if (threadIdx.x == 0) dst[blockIdx.x] = __ldcg(src + (blockIdx.x + 1) % gridDim.x) + 1.f;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) vt_bench_chain_step(const float *src, float *dst) {
  pdl_trigger();
  pdl_wait();
  step(src, dst);
}

extern "C" __global__ void __launch_bounds__(256) vt_bench_barrier_steps(float *a, float *b, unsigned *arrive,
                                                                         unsigned *gen, int n) {
  for (int i = 0; i < n; ++i) {
    step(i % 2 ? b : a, i % 2 ? a : b);
    grid_barrier(arrive, gen);
  }
}
#endif  // VT_CUDA_EXPERIMENTS
