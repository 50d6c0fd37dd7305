// One launch for the MLP half of a decode layer at batch 1 (an experiment: VT_CUDA_MLP_BLOCK=1, --experiments
// builds only). What add_rmsnorm_res32 (residual += o; x = rmsnorm(residual) * w), gemv_swiglu and the down gemv
// do in three launches, in one persistent kernel with one grid barrier, bit for bit:
//   phase A, every block: x = rmsnorm(residual + proj) * w rounded to bf16, into shared memory (add_rmsnorm_row's
//     sum of squares in its order: 256 threads, strided, block_sum), as the prologue of phase B's first row group,
//     so that group's first gate|up weight loads are in flight before the PDL wait;
//   phase B: act = silu(x · gate) * (x · up), the I rows over the whole grid by 8-row groups;
//   grid barrier (every block must be resident: the host sizes the grid from the occupancy);
//   phase C: residual += proj (the o output), proj = act · down + bias, the H rows over the whole grid; each
//     block's first down weight loads go out before the barrier (its prologue).
// What it would save: two launch boundaries a layer for one grid barrier (bench/cuda-sync.cpp says what each
// costs). Parameters: residual (H) fp32, proj (H) bf16 or fp32 (VT_CUDA_SUBLAYER_F32), norm_w (H) fp32, w_gate_up
// (2I, H) bf16, act (I) bf16, w_down (H, I) bf16, down_bias (H) fp32 or null, barrier: two words 128 bytes apart,
// zero before the first launch. Dynamic shared memory: H bf16.
#include "gemv.cuh"

#if VT_CUDA_EXPERIMENTS
using namespace vtk;

namespace {

template <class XP>
__device__ __forceinline__ void mlp_block(float *__restrict__ residual, XP *__restrict__ proj,
                                          const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ w_gu,
                                          bf16 *__restrict__ act, const bf16 *__restrict__ w_down,
                                          const float *__restrict__ down_bias, int H, int I, unsigned *barrier,
                                          int vec_gu, int vec_down) {
  extern __shared__ uint4 mlp_smem[];  // 16-byte aligned, as the vector path's x loads need
  bf16 *xs = reinterpret_cast<bf16 *>(mlp_smem);
  pdl_trigger();
  const RowsX<bf16> x{xs, H};
  const int gu_groups = (I + 7) / 8, down_groups = (H + 7) / 8;
  gemv_warp<1, 2, bf16>(
      x, w_gu, nullptr, act, H, I, vec_gu, nullptr,
      [&] {
        pdl_wait();
        float ss = 0.f;
        for (int i = threadIdx.x; i < H; i += blockDim.x) {
          const float v = residual[i] + to_f32(proj[i]);
          ss += v * v;
        }
        const float inv = 1.f / sqrtf(block_sum(ss) / float(H) + eps);
        for (int i = threadIdx.x; i < H; i += blockDim.x)
          xs[i] = from_f32<bf16>((residual[i] + to_f32(proj[i])) * inv * norm_w[i]);
        __syncthreads();
      },
      nullptr, int(blockIdx.x));
  for (int g = int(blockIdx.x + gridDim.x); g < gu_groups; g += int(gridDim.x))
    gemv_warp<1, 2, bf16>(x, w_gu, nullptr, act, H, I, vec_gu, nullptr, NoPrologue{}, nullptr, g);
  const RowsX<bf16, true> a{act, I};
  gemv_warp<1, 1, XP, GemvOut::kAddThenStore>(a, w_down, down_bias, proj, I, H, vec_down, residual,
                                              [&] { grid_barrier(barrier, barrier + 32); }, nullptr, int(blockIdx.x));
  for (int g = int(blockIdx.x + gridDim.x); g < down_groups; g += int(gridDim.x))
    gemv_warp<1, 1, XP, GemvOut::kAddThenStore>(a, w_down, down_bias, proj, I, H, vec_down, residual, NoPrologue{},
                                                nullptr, g);
}

}  // namespace

#define VT_MLP_BLOCK(SUFFIX, XP)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) vt_mlp_block_##SUFFIX(                                    \
      float *residual, XP *proj, const float *norm_w, float eps, const bf16 *w_gu, bf16 *act, const bf16 *w_down, \
      const float *down_bias, int H, int I, unsigned *barrier, int vec_gu, int vec_down) {                   \
    mlp_block<XP>(residual, proj, norm_w, eps, w_gu, act, w_down, down_bias, H, I, barrier, vec_gu, vec_down); \
  }
VT_MLP_BLOCK(bf16, bf16)
VT_MLP_BLOCK(f32, float)
#endif  // VT_CUDA_EXPERIMENTS
