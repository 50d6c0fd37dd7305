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
