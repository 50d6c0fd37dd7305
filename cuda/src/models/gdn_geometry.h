// The geometry of one Gated DeltaNet layer (the linear-attention layers of Qwen3.5 / Qwen3.6): what the model
// binds a layer with (models/model_ops.h) and what the backends' ops take (backend/cpu/gated_delta.h, and the CUDA
// backend's gated_delta_ops.h). Key head kh serves the value heads [kh · Hv/Hk, (kh + 1) · Hv/Hk) (transformers'
// repeat_interleave); Hv is a multiple of Hk.
#pragma once

#include <cstdint>

namespace vt {

struct GdnGeometry {
  int32_t n_k_heads, n_v_heads, k_dim, v_dim;
  int64_t qkv_dim() const { return 2 * int64_t(n_k_heads) * k_dim + int64_t(n_v_heads) * v_dim; }
  int64_t state_floats() const { return int64_t(n_v_heads) * k_dim * v_dim; }  // one slot's recurrent state
  // What a layer keeps per sequence in its part of a state slot (models/state_layout.h), in this order: the conv
  // state (the last W - 1 rows of the conv's input, (W - 1, C)), then the recurrent state (Hv, Dk, Dv); fp32.
  int64_t conv_state_floats(int32_t conv_kernel) const { return int64_t(conv_kernel - 1) * qkv_dim(); }
  int64_t slot_floats(int32_t conv_kernel) const { return conv_state_floats(conv_kernel) + state_floats(); }
};

}  // namespace vt
