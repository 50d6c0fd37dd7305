// Device-side helpers shared by every kernel family: the element types, their conversions to and from fp32,
// and warp/block reductions. Kernels are templates over the activation type (float, or bf16 with fp32
// arithmetic inside) and each .cu file instantiates its `extern "C"` entry points, which the host looks up by
// name (backend/cuda/cuda_ops.cpp). No CUDA runtime API is used: the module is loaded through the driver.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

namespace vtk {

// Raw 16-bit storage types, distinct so that templates can tell them apart. bf16 is converted by bit
// manipulation (exact widening, round-to-nearest-even narrowing, as dtype.h and torch do); fp16 through
// cuda_fp16.h, which is exact for every value.
struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(bf16 v) { return __uint_as_float(uint32_t(v.bits) << 16); }
__device__ __forceinline__ float to_f32(f16 v) { return __half2float(__ushort_as_half(v.bits)); }
__device__ __forceinline__ float bf16_bits_to_f32(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

__device__ __forceinline__ bf16 f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // NaN stays a (quiet) NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float v) { return f32_to_bf16(v); }

// 16 bytes read once (weights, logits): through the read-only path, kept out of L1 (ld.global.nc.L1::no_allocate),
// so that what is reused (x, the normed rows) stays cached.
__device__ __forceinline__ uint4 load_stream(const uint4 *p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ float4 load_stream(const float4 *p) {
  const uint4 v = load_stream(reinterpret_cast<const uint4 *>(p));
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
}

// Reads of the KV cache, through the read-only path: coherent only for data nobody writes during the launch, which
// holds for the decode attention (it reads the step's own keys only after its PDL wait, and never writes the cache).
__device__ __forceinline__ uint4 load_kv(const uint4 *p) { return __ldg(p); }
template <class T>
__device__ __forceinline__ float load_kv_elem(const T *p) { return to_f32(*p); }

// Unpacks 8 bf16 held in a 16-byte vector.
__device__ __forceinline__ void unpack_bf16x8(const uint4 v, float (&f)[8]) {
  f[0] = bf16_bits_to_f32(v.x & 0xffffu), f[1] = bf16_bits_to_f32(v.x >> 16);
  f[2] = bf16_bits_to_f32(v.y & 0xffffu), f[3] = bf16_bits_to_f32(v.y >> 16);
  f[4] = bf16_bits_to_f32(v.z & 0xffffu), f[5] = bf16_bits_to_f32(v.z >> 16);
  f[6] = bf16_bits_to_f32(v.w & 0xffffu), f[7] = bf16_bits_to_f32(v.w >> 16);
}

// Programmatic dependent launch (sm_90+; no-ops on older targets and for kernels launched without it):
//   pdl_trigger(): this grid's dependents may start launching now (they still wait for its completion before
//     touching its results); called first thing by every kernel entry point;
//   pdl_wait(): blocks until every earlier grid on the stream has completed and its writes are visible; a
//     kernel launched with Context::launch_pdl calls it before any write and before reading what an earlier
//     kernel of the step writes. A kernel may start while several earlier ones still run (each triggers its
//     dependents at once), so what it reads before the wait must be written by none of the step's kernels:
//     weights, the step's integers (uploaded before the step's first launch) and KV cache rows of earlier steps
//     (the GEMVs' EARLY loads, rope_store's cos/sin table, the decode attention's first keys). The entry points
//     call it right after pdl_trigger() (the GEMVs after computing their row pointers), so the gain is the
//     launch and block scheduling of the next kernel hidden under this one's run, ~0.3-1 us a launch; Ops
//     launches every kernel that waits this way with PDL (all but the tiled GEMM and prefill attention).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Thread-block clusters (sm_90+; no-ops on older targets, whose kernels are built without clusters):
// cluster_arrive() / cluster_wait() are the two halves of the cluster-wide barrier (release, then acquire);
// cluster_load reads a float of another block's shared memory; cluster_rank is this block's rank in its cluster.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
// The float at `local` (a __shared__ address of this block) in the shared memory of cluster block `rank`.
__device__ __forceinline__ float cluster_load(const float *local, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned a = unsigned(__cvta_generic_to_shared(local));
  unsigned remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
#else
  return *local;
#endif
}
__device__ __forceinline__ unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total. Contains
// __syncthreads, so every thread of the block must call it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < n_warps ? partial[lane] : 0.f;
  return warp_sum(v);
}

}  // namespace vtk
