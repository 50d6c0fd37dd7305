// The CUDA backend's Gated DeltaNet ops (the linear-attention layers of Qwen3.5 / Qwen3.6): backend/cpu/
// gated_delta.h's ops on device memory, enqueued on a stream, with the same contracts and the same batch metadata
// (cpu::RecurrentBatch's arrays in device memory, freshness read from the sequences' first positions) and geometry
// (cpu::GdnGeometry: one description of a layer for both backends). Activations are in the activation type
// (cuda_ops.h's Act: bf16 with fp32 arithmetic inside, or fp32); states, weights (conv weight (C, W), A_log,
// dt_bias, the norm weight) and the gates' outputs g and beta are fp32. All pointers are device pointers. Nothing
// allocates or synchronizes: every op may be captured in a graph, which then replays for any lengths and slots with
// the same row count T (the grids depend on T, n_seqs and the geometry only).
//
// A class of its own rather than more of cuda::Ops: only the hybrid models have these layers, its kernels are one
// family (gated_delta.cu, their own fatbin), and a model that has no such layer never resolves them.
#pragma once

#include <cstdint>

#include "backend/cpu/gated_delta.h"
#include "backend/cuda/context.h"
#include "backend/cuda/cuda_ops.h"

namespace vt::cuda {

// cpu::RecurrentBatch with the arrays in device memory, except that a sequence is fresh (starts here: its states
// read as zeros, then overwritten) when its first position is 0, as the CPU decoder decides it: the step's own
// positions (the attention batch's seq_pos0), so a captured decode step whose metadata the device moves on
// (step_advance.h) is fresh exactly when it should be, with no flags to keep in step.
struct DeviceRecurrentBatch {
  int32_t n_seqs;
  CUdeviceptr seq_start;  // (n_seqs + 1) int32: first row of each sequence, then the total row count
  // (n_seqs) int32 state slot of each sequence; no two sequences share one. A slot < 0 is padding (a decode graph's
  // rows past its batch): computed from zero states, nothing kept, no slot touched.
  CUdeviceptr slot;
  CUdeviceptr pos0;       // (n_seqs) int32 first position of each sequence's rows, 0: fresh; or 0 (null): none fresh
};

class GatedDeltaOps {
 public:
  // Resolves the kernels for activation type `act` up front (a missing one throws here, not mid-step).
  GatedDeltaOps(Context &ctx, Act act);
  Act act() const { return act_; }

  static constexpr int32_t kMaxConvWidth = 4;  // gated_delta.cuh's kConvMaxWidth: the models' conv_kernel_size
  static constexpr int32_t kMaxKeyDim = 128;   // gated_delta.cuh's kRuleMaxKeyDim: the models' head_k_dim

  // cpu::causal_conv1d_silu: out(T, C) = silu(causal depthwise conv of each sequence's rows of x), the conv
  // state of a slot (W-1, C) fp32 at conv_state + slot · slot_stride floats, updated in place. x and out in
  // the activation type, x rows x_ld elements apart (0: C; e.g. the qkv columns of a wider projection output),
  // out contiguous and not aliasing x. 1 <= W <= kMaxConvWidth. T is the batch's row count (seq_start[n_seqs]).
  // chunk_rows: rows a thread walks (0: the op's choice from T and the GPU; tests force small ones).
  void causal_conv1d_silu(CUstream s, CUdeviceptr x, const DeviceRecurrentBatch &b, int64_t T, int64_t C, int32_t W,
                          CUdeviceptr weight, CUdeviceptr conv_state, int64_t slot_stride, CUdeviceptr out,
                          int64_t x_ld = 0, int32_t chunk_rows = 0);
  // The rows per thread causal_conv1d_silu picks for T rows of C channels on a GPU of sm_count SMs.
  static int32_t conv_chunk_rows(int64_t T, int64_t C, int sm_count);

  // cpu::gdn_gates: beta = sigmoid(b), g = -exp(A_log[h]) · softplus(a + dt_bias[h]) for T rows of n_v_heads.
  // b and a in the activation type, rows ld elements apart (0: n_v_heads); beta, g (T, n_v_heads) fp32 (the
  // delta rule's inputs; fp32 as transformers keeps g).
  void gdn_gates(CUstream s, CUdeviceptr b, CUdeviceptr a, int64_t T, int32_t n_v_heads, CUdeviceptr A_log,
                 CUdeviceptr dt_bias, CUdeviceptr beta, CUdeviceptr g, int64_t ld = 0);

  // cpu::gated_delta_rule (its recurrent form, for decode and, until the chunked form comes, prefill):
  // qkv(T, geo.qkv_dim()) the conv's output in the activation type (raw q and k: the op l2-normalises them and
  // scales q by 1/sqrt(Dk)); g, beta (T, Hv) fp32; the recurrent state of a slot (Hv, Dk, Dv) fp32 at state +
  // slot · slot_stride floats, updated in place (read as zeros when fresh); out(T, Hv, Dv) in the activation
  // type. k_dim <= kMaxKeyDim; n_v_heads a multiple of n_k_heads.
  void gated_delta_rule(CUstream s, CUdeviceptr qkv, CUdeviceptr g, CUdeviceptr beta, const DeviceRecurrentBatch &b,
                        const cpu::GdnGeometry &geo, CUdeviceptr state, int64_t slot_stride, CUdeviceptr out);

  // cpu::gated_rmsnorm: out(rows, dim) = weight · x / sqrt(mean(x²) + eps) · silu(z), weight (dim) fp32, x, z and
  // out in the activation type; out may be x. z: norm row r's is at z + (r / heads) · z_ld + (r % heads) · dim
  // elements (z_ld 0: z contiguous (rows, dim)); for the layer rows = T · Hv, dim = Dv, heads = Hv and z_ld the
  // row stride of in_proj_z's output (Hv · Dv, or wider when it sits in a fused projection's output).
  void gated_rmsnorm(CUstream s, CUdeviceptr x, CUdeviceptr z, int64_t rows, int64_t dim, CUdeviceptr weight,
                     float eps, CUdeviceptr out, int64_t z_ld = 0, int32_t heads = 1);

 private:
  Context &ctx_;
  Act act_;
  CUfunction conv_, gates_, rule_, norm_;
};

}  // namespace vt::cuda
