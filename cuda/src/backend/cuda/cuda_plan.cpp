#include "backend/cuda/cuda_plan.h"

#include <algorithm>

#include "backend/cuda/driver.h"

namespace vt {

bool cuda_usable(std::string *why) {
  const cuda::Availability a = cuda::cuda_available();
  if (why) *why = a.reason;
  return a.ok;
}

int64_t cuda_total_bytes() { return cuda::device_total_bytes(0); }

CudaSizes cuda_sizes(const ModelConfig &c, const MemoryPlan &m, const vt_engine_params &p) {
  // cuBLASLt's workspace is counted whenever it may load (bf16 activations, not VT_CUDA_CUBLASLT=0): at most
  // 32 MiB too many, on a machine without the library.
  const CudaDecoderParams cp = cuda_decoder_params(m, p);
  const CudaDecoder::Workspace ws = CudaDecoder::plan_workspace(c, cp, cuda::device_sm_count(0),
                                                                cp.act == cuda::Act::BF16 && cp.tuning.cublaslt);
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
  cp.block_size = m.block_size;
  cp.state = m.state;
  cp.n_state_slots = m.n_state_slots;
  cp.max_context = m.max_context;
  cp.graph_buckets = m.graph_buckets;  // empty when cudaGraphs is off
  cp.graph_dedup = m.graph_dedup;
  cp.graph_first_use = m.graph_first_use;
  cp.tuning = m.tuning.cuda;
  return cp;
}

}  // namespace vt
