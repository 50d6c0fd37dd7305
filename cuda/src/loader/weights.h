// A model's weights, bound by its schema (models/weight_schema.h): views into the checkpoint mapping for the
// matrices (used in place) plus fp32 copies of the small vectors (norms, biases), whose conversion is cheap and
// keeps the hot loops simple. Looked up by (role, layer), never by name, so the model's constructor is the same
// whatever the checkpoint calls its tensors.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "dtype.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "models/weight_schema.h"

namespace vt {

struct Matrix {  // (rows, cols) row-major, HF Linear layout: one row per output feature
  const void *data = nullptr;
  DType dtype = DType::BF16;
  int64_t rows = 0, cols = 0;
  int64_t bytes() const { return rows * cols * int64_t(dtype_size(dtype)); }
};

class Weights {
 public:
  Weights() = default;
  // Every spec of `s` declared, nothing bound: the matrices shapes only (data null, `dtype`), the vectors empty.
  // What shape_weights returns, and what bind_weights (or a test, through set) fills.
  explicit Weights(const WeightSchema &s, DType dtype = DType::BF16);

  // A declared tensor of layer `layer` (-1: a global one). An optional one the config says is absent is an empty
  // Matrix (data null, rows 0) or vector. A role the schema never declared for that layer, a layer out of range or
  // the wrong kind is a std::logic_error: a model asking for it is a bug, not a bad checkpoint. The references stay
  // valid while the Weights live (moves included): backends keep pointers to them (ModelOps::linear_weights).
  const Matrix &matrix(Role r, int32_t layer = -1) const;
  const std::vector<float> &vec(Role r, int32_t layer = -1) const;
  // The declared shape: (rows, cols), a vector's as declared ((n), (C, 1, W)), or () for an absent tensor.
  std::vector<int64_t> shape(Role r, int32_t layer = -1) const;
  int32_t n_layers() const { return int32_t(slots_.size()) - 1; }

  // Binds a declared tensor (the binder's and the tests' way in); the same rules as matrix() / vec().
  void set(Role r, int32_t layer, const Matrix &m);
  void set(Role r, int32_t layer, std::vector<float> v);

  int64_t n_params = 0;         // elements of every tensor used (the tied lm_head counted once)
  int64_t bytes = 0;            // their bytes in the checkpoint
  int64_t host_bytes = 0;       // the fp32 copies of small vectors, in host memory
  DType dtype = DType::BF16;    // dtype of the embedding (the dominant one)
  // Tensors under the schema's skipped_prefixes (a vision tower, an MTP head): in the checkpoint, never read.
  int64_t skipped_bytes = 0;
  int32_t skipped_tensors = 0;

 private:
  struct Slot {
    bool declared = false, absent = false;
    TensorSpec::Kind kind = TensorSpec::kMatrix;
    Matrix m;               // kMatrix
    std::vector<float> v;   // kVector: empty until bound
    int64_t n = 0;          // kVector: its declared length (elements)
    std::vector<int64_t> dims;  // kVector: its declared shape ((n), or (C, 1, W) for a conv weight)
  };
  const Slot *find(Role r, int32_t layer) const;  // null: not declared (or no such layer)
  Slot &slot(Role r, int32_t layer, TensorSpec::Kind kind, const char *what);
  const Slot &slot(Role r, int32_t layer, TensorSpec::Kind kind, const char *what) const;
  // [0]: the global tensors, [l + 1]: layer l's; a fixed table per layer, sized once (so references never move).
  std::vector<std::array<Slot, kRoleCount>> slots_ = std::vector<std::array<Slot, kRoleCount>>(1);
};

// Binds every tensor of the schema (which must be `c`'s); throws ERR_SHAPE_MISMATCH / ERR_UNSUPPORTED_DTYPE /
// ERR_BAD_CHECKPOINT naming the tensor. A tensor the model does not use is ERR_BAD_CHECKPOINT too (unless under a
// skipped prefix): the config then describes another model than the weights. `progress(done, total)` is called
// after each layer's last tensor.
Weights bind_weights(const ModelConfig &c, const WeightSchema &s, const Checkpoint &ck,
                     const std::function<void(int, int)> &progress);

// The schema's shapes for a config, no data: what sizing needs (memory_plan.cpp, the backends' sizing ops) before a
// checkpoint is read. n_params and bytes are the config's dtype's.
Weights shape_weights(const ModelConfig &c, const WeightSchema &s);

}  // namespace vt
