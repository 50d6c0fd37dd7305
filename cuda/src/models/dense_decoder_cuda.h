// The dense decoder of models/dense_decoder.h on one GPU: the same forward() over the same weights, with the
// weights, the paged KV cache and the activations in device memory and every op from backend/cuda. Activations
// are fp32 (the debugging mode whose results match the CPU backend to rounding) or bf16 (fp32 arithmetic inside
// every kernel). With bf16 activations only what feeds a product (the normed rows, the attention output, the
// SwiGLU product), the products' outputs and q/k/v are bf16: the residual stream, the final normed rows (the
// lm_head's input) and the logits are fp32, and attention's softmax and accumulators are fp32. The KV cache is
// in the activation type, with the CPU's paged layout
// (layer, K|V, n_blocks, block_size, n_kv_heads, head_dim). Matrices stay in their stored dtype and are widened
// in the kernels: the decode GEMV for bf16 weights and up to 8 rows, the tiled GEMM for everything else.
//
// Threads: built on the loading thread, run on the engine's step thread; each entry point makes the context
// current first. Any CUDA failure throws vt::Error (the step loop ends that batch's requests with it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_ops.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "loader/weights.h"
#include "models/decoder.h"

namespace vt {

struct CudaDecoderParams {
  cuda::Act act = cuda::Act::F32;
  int32_t max_tokens = 0;      // rows of one forward
  int32_t max_seqs = 0;        // sequences of one forward
  int32_t max_logit_rows = 0;  // rows of one project()
  int32_t n_blocks = 0, block_size = 0;
};

class CudaDecoder : public Decoder {
  using CUdeviceptr = cuda::CUdeviceptr;

 public:
  // Uploads every tensor of `w` (views into `ck`'s mapping), releasing each tensor's mapped pages once it is on
  // the device, and allocates the KV pool and the activations. `progress(done, total)` after each layer.
  CudaDecoder(const ModelConfig &config, const Weights &w, const Checkpoint &ck, const CudaDecoderParams &p,
              const std::function<void(int, int)> &progress);
  ~CudaDecoder() override;

  void forward(const ForwardBatch &b) override;
  void project(const int32_t *rows, int32_t n, float *logits) override;

  const std::string &device_name() const { return ctx_->name(); }
  int64_t weight_device_bytes() const { return weight_bytes_; }
  int64_t kv_bytes() const { return int64_t(kv_.bytes()); }
  int64_t workspace_bytes() const { return workspace_bytes_; }

 private:
  struct DMatrix {  // (rows, cols) row-major on the device, stored dtype
    CUdeviceptr ptr = 0;
    DType dtype = DType::BF16;
    int64_t rows = 0, cols = 0;
  };
  struct DLayer {
    CUdeviceptr attn_norm = 0, mlp_norm = 0, q_norm = 0, k_norm = 0;  // fp32; q/k norm 0 unless Qwen3
    DMatrix q, k, v, o, gate, up, down;
    CUdeviceptr q_bias = 0, k_bias = 0, v_bias = 0, o_bias = 0, gate_bias = 0, up_bias = 0, down_bias = 0;  // 0: none
  };

  DMatrix upload(const Matrix &m, const Checkpoint &ck);
  CUdeviceptr upload(const std::vector<float> &v);  // 0 for an empty vector
  CUdeviceptr scratch(size_t elems, size_t elem_size);
  void linear(CUdeviceptr x, int32_t T, const DMatrix &m, CUdeviceptr bias, CUdeviceptr y, bool y_f32 = false,
              bool x_f32 = false);
  CUdeviceptr k_cache(int l) const { return kv_.ptr() + CUdeviceptr(2 * l) * kv_layer_bytes_; }
  CUdeviceptr v_cache(int l) const { return kv_.ptr() + CUdeviceptr(2 * l + 1) * kv_layer_bytes_; }

  ModelConfig c_;
  CudaDecoderParams p_;
  float rope_scale_ = 1.f;
  bool sub_f32_ = false;  // o/down outputs fp32 (VT_CUDA_SUBLAYER_F32=1, debugging; bf16 activations only)
  // Declared first, destroyed last: every buffer below belongs to this context.
  std::unique_ptr<cuda::Context> ctx_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::Ops> ops_;

  std::vector<cuda::DeviceBuffer> buffers_;  // weights and activations, owned here
  int64_t weight_bytes_ = 0, workspace_bytes_ = 0;
  DMatrix embed_, lm_head_;
  std::vector<DLayer> layers_;
  CUdeviceptr final_norm_ = 0, inv_freq_ = 0;  // (hidden), (head_dim / 2) fp32

  cuda::DeviceBuffer kv_;        // (layer, K|V, n_blocks, block_size, n_kv_heads, head_dim)
  CUdeviceptr kv_layer_bytes_ = 0;

  // RunState, activation type unless said otherwise
  CUdeviceptr residual_ = 0;               // (T, hidden) fp32
  CUdeviceptr normed_ = 0;                 // (T, hidden) the next product's input
  CUdeviceptr final_ = 0;                  // (T, hidden) fp32, the final norm's rows (normed_ when fp32)
  CUdeviceptr q_ = 0, attn_ = 0;           // (T, n_heads * head_dim)
  CUdeviceptr k_ = 0, v_ = 0;              // (T, n_kv_heads * head_dim)
  CUdeviceptr proj_ = 0;                   // (T, hidden) (fp32 when sub_f32_)
  CUdeviceptr gate_ = 0, up_ = 0;          // (T, intermediate)
  CUdeviceptr last_ = 0;                   // (max_logit_rows, hidden) fp32, rows gathered for project()
  CUdeviceptr logits_ = 0;                 // (max_logit_rows, vocab) fp32
  CUdeviceptr rows_ = 0;                   // (max_logit_rows) int32
  cuda::DeviceBuffer meta_;                // int32: the batch's tokens, positions, slots, sequence tables
  std::vector<int32_t> meta_host_;
};

}  // namespace vt
