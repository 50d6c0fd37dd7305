#include "models/dense_model.h"

namespace vt {

DenseModel::DenseModel(const ModelConfig &c, const Weights &w, ModelOps &ops) {
  const int64_t H = c.hidden_size, QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim;
  x_ = ops.tensor({H}, Storage::kResidual);
  h_ = ops.tensor({H}, Storage::kOutput);  // the normed input of the current sub-block (at the end: the final norm's)
  qkv_ = ops.tensor({QD, KVD, KVD});
  attn_ = ops.tensor({QD});
  act_ = ops.tensor({c.intermediate_size});
  embed_ = ops.linear_weights({&w.embed});
  for (const LayerWeights &L : w.layers) {
    layers_.push_back({ops.linear_weights({&L.q, &L.k, &L.v}, {&L.q_bias, &L.k_bias, &L.v_bias}),
                       ops.linear_weights({&L.o}, {&L.o_bias}),
                       ops.linear_weights({&L.gate, &L.up}, {&L.gate_bias, &L.up_bias}),
                       ops.linear_weights({&L.down}, {&L.down_bias}), ops.vector_weights(L.attn_norm),
                       ops.vector_weights(L.q_norm), ops.vector_weights(L.k_norm), ops.vector_weights(L.mlp_norm)});
  }
  final_norm_ = ops.vector_weights(w.final_norm);
  head_ = ops.linear_weights({&w.lm_head});  // (tied: the embedding's handle)
}

Weights DenseModel::weight_shapes(const ModelConfig &c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = int64_t(c.n_heads) * c.head_dim, KVD = int64_t(c.n_kv_heads) * c.head_dim;
  // The dtype the config declares: the CUDA plan's sizing follows it (our GEMMs fuse a bf16 SwiGLU layer and need
  // no gate|up scratch; an fp16 or fp32 one keeps it). A checkpoint whose tensors are not what its config says
  // gets an estimate off by that scratch.
  const DType dt = c.torch_dtype == "float32" ? DType::F32 : c.torch_dtype == "float16" ? DType::F16 : DType::BF16;
  auto m = [dt](int64_t rows, int64_t cols) {
    Matrix x;
    x.rows = rows, x.cols = cols, x.dtype = dt;
    return x;
  };
  Weights w;
  w.embed = m(V, H), w.lm_head = m(V, H);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights L;
    L.q = m(QD, H), L.k = m(KVD, H), L.v = m(KVD, H), L.o = m(H, QD);
    L.gate = m(I, H), L.up = m(I, H), L.down = m(H, I);
    w.layers.push_back(std::move(L));
  }
  return w;
}

void DenseModel::forward(ModelOps &ops) const {
  ops.embed(embed_, x_);
  ops.rmsnorm(x_, layers_[0].attn_norm, h_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer &L = layers_[l];
    const bool last = l + 1 == layers_.size();
    // attention: q|k|v (Qwen3: each head of q and k normed), RoPE, the new keys and values into the cache
    ops.linear(h_, L.qkv, qkv_, Epilogue::rope_store(int32_t(l), L.q_norm, L.k_norm));
    ops.attention(qkv_, int32_t(l), attn_);
    // residual += o(attention); h = post_attention_layernorm(residual)
    ops.linear(attn_, L.o, h_, Epilogue::add_norm(x_, L.mlp_norm));
    // MLP: silu(gate) * up, then down; residual += it; h = the next layer's input_layernorm (or the final norm:
    // the model's output)
    ops.linear(h_, L.gate_up, act_, Epilogue::swiglu());
    ops.linear(act_, L.down, h_, Epilogue::add_norm(x_, last ? final_norm_ : layers_[l + 1].attn_norm, last));
  }
}

}  // namespace vt
