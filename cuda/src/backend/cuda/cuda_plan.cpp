#include "backend/cuda/cuda_plan.h"

#include <algorithm>

#include "backend/cuda/driver.h"
#include "backend/cuda/kv_pool.h"

namespace vt {

bool cuda_usable(std::string *why) {
  const cuda::Availability a = cuda::cuda_available();
  if (why) *why = a.reason;
  return a.ok;
}

int64_t cuda_total_bytes() { return cuda::device_total_bytes(0); }

namespace {

// GPU 0's free bytes under its primary context, retained for the call and made current on this thread meanwhile
// (what was current before is put back).
int64_t free_bytes_now() {
  const cuda::Driver &d = cuda::driver();
  cuda::CUdevice dev = 0;
  cuda::check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  cuda::CUcontext ctx = nullptr, prev = nullptr;
  cuda::check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  size_t free = 0, total = 0;
  cuda::CUresult r = d.cuCtxGetCurrent(&prev);
  if (r == cuda::CUDA_SUCCESS) r = d.cuCtxSetCurrent(ctx);
  if (r == cuda::CUDA_SUCCESS) {
    r = d.cuMemGetInfo(&free, &total);
    d.cuCtxSetCurrent(prev);
  }
  d.cuDevicePrimaryCtxRelease(dev);
  cuda::check(r, "cuMemGetInfo");
  return int64_t(free);
}

}  // namespace

GpuFacts cuda_gpu_facts(bool with_free) {
  GpuFacts f;
  f.sm_count = cuda::device_sm_count(0);
  f.total_bytes = cuda::device_total_bytes(0);
  const cuda::KvPoolSupport s = cuda::kv_pool_support(0);
  f.vmm = s.vmm, f.granularity = s.granularity;
  if (with_free) f.free_bytes = free_bytes_now();
  return f;
}

CudaDeviceHold::CudaDeviceHold() {
  const cuda::Driver &d = cuda::driver();
  cuda::check(d.cuDeviceGet(&device_, 0), "cuDeviceGet");
  cuda::CUcontext ctx = nullptr;
  cuda::check(d.cuDevicePrimaryCtxRetain(&ctx, device_), "cuDevicePrimaryCtxRetain");
}

CudaDeviceHold::~CudaDeviceHold() { cuda::driver().cuDevicePrimaryCtxRelease(device_); }

int32_t kv_chunk_blocks(int64_t plane_block_bytes, int64_t granularity) {
  return cuda::kv_chunk_blocks(plane_block_bytes, granularity);
}

StateSlotLayout state_slot_layout(int64_t slot_bytes, int32_t n_slots, int64_t granularity) {
  const cuda::SlotLayout l = cuda::slot_layout(slot_bytes, n_slots, granularity);
  return {l.stride, l.chunk};
}

CudaSizes cuda_sizes(const ModelConfig &c, const MemoryPlan &m, const vt_engine_params &p, int sm_count) {
  // cuBLASLt's workspace is counted whenever it may load (bf16 activations and VT_CUDA_GEMM=cublaslt, not
  // VT_CUDA_CUBLASLT=0): at most 32 MiB too many, on a machine without the library. By default our tensor-core
  // GEMMs serve and cuBLASLt is not loaded.
  const CudaDecoderParams cp = cuda_decoder_params(m, p);
  const CudaDecoder::Workspace ws = CudaDecoder::plan_workspace(
      c, cp, sm_count, cp.act == cuda::Act::BF16 && cp.tuning.cublaslt && cp.tuning.gemm == "cublaslt");
  CudaSizes s;
  s.workspace_bytes = ws.total, s.pinned_bytes = ws.pinned;
  return s;
}

CudaDecoderParams cuda_decoder_params(const MemoryPlan &m, const vt_engine_params &p) {
  CudaDecoderParams cp;
  // bf16 by default: tensor-core prefill and cuBLASLt need it, and the golden check holds it to transformers'
  // own bf16 error; float32 is the debugging mode that matches the CPU to rounding.
  cp.act = p.dtype == VT_DTYPE_FLOAT32 ? cuda::Act::F32 : cuda::Act::BF16;
  cp.max_tokens = m.max_batch_tokens;
  cp.max_seqs = m.max_seqs;
  cp.max_logit_rows = std::max(m.max_seqs, 16);  // sampled rows, or one teacher-forcing block
  cp.n_blocks = m.n_blocks;
  cp.n_blocks_base = m.n_blocks_base;
  cp.kv_grows = m.kv_chunk_blocks > 0;  // (the plan made the pool fixed, n_blocks_base = n_blocks, where it cannot)
  cp.block_size = m.block_size;
  cp.state = m.state;
  cp.n_state_slots = m.n_state_slots;
  cp.n_state_slots_base = m.n_state_slots_base;
  cp.state_slot_stride = m.state_slot_stride;
  cp.slots_grow = m.state_slot_chunk > 0;  // (the plan made them a fixed set, base = all, where they cannot)
  cp.max_context = m.max_context;
  cp.graph_buckets = m.graph_buckets;  // empty when cudaGraphs is off
  cp.graph_dedup = m.graph_dedup;
  cp.graph_first_use = m.graph_first_use;
  cp.tuning = m.tuning.cuda;
  return cp;
}

}  // namespace vt
