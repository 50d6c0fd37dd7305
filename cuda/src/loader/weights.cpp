// The Weights table and shape_weights; binding from a checkpoint is loader/bind_weights.cpp.
#include "loader/weights.h"

#include <stdexcept>
#include <string>

namespace vt {

Weights::Weights(const WeightSchema &s, DType dt) : dtype(dt), slots_(size_t(s.n_layers()) + 1) {
  for (const TensorSpec &t : s.tensors) {
    if (t.layer < -1 || int(t.role) >= kRoleCount)
      throw std::logic_error("weight schema: " + t.name + " has no valid role and layer");
    Slot &x = slots_[size_t(t.layer + 1)][size_t(t.role)];
    if (x.declared) throw std::logic_error("weight schema: " + t.name + " declares a role and layer already declared");
    if (t.kind == TensorSpec::kMatrix ? t.shape.size() != 2 : t.shape.empty())
      throw std::logic_error("weight schema: " + t.name + " has a shape of the wrong rank");
    x.declared = true, x.absent = t.absent, x.kind = t.kind;
    if (t.absent) continue;
    if (t.kind == TensorSpec::kMatrix)
      x.m.rows = t.shape[0], x.m.cols = t.shape[1], x.m.dtype = dt;
    else {
      x.dims = t.shape;
      for (x.n = 1; int64_t d : t.shape) x.n *= d;
    }
  }
}

const Weights::Slot *Weights::find(Role r, int32_t layer) const {
  if (layer < -1 || layer >= n_layers() || int(r) >= kRoleCount) return nullptr;
  const Slot &x = slots_[size_t(layer + 1)][size_t(r)];
  return x.declared ? &x : nullptr;
}

const Weights::Slot &Weights::slot(Role r, int32_t layer, TensorSpec::Kind kind, const char *what) const {
  const Slot *x = find(r, layer);
  if (x && x->kind == kind) return *x;
  // (The message is built only on failure: models look their tensors up by the hundred at load.)
  const std::string where = std::string(role_name(r)) + (layer < 0 ? "" : " of layer " + std::to_string(layer));
  if (!x) throw std::logic_error(std::string("Weights::") + what + ": the schema declares no " + where);
  throw std::logic_error(std::string("Weights::") + what + ": " + where + " is a " +
                         (x->kind == TensorSpec::kMatrix ? "matrix" : "vector"));
}

Weights::Slot &Weights::slot(Role r, int32_t layer, TensorSpec::Kind kind, const char *what) {
  return const_cast<Slot &>(static_cast<const Weights &>(*this).slot(r, layer, kind, what));
}

const Matrix &Weights::matrix(Role r, int32_t layer) const { return slot(r, layer, TensorSpec::kMatrix, "matrix").m; }

const std::vector<float> &Weights::vec(Role r, int32_t layer) const {
  return slot(r, layer, TensorSpec::kVector, "vec").v;
}

std::vector<int64_t> Weights::shape(Role r, int32_t layer) const {
  const Slot *x = find(r, layer);
  if (!x) slot(r, layer, TensorSpec::kMatrix, "shape");  // throws, saying what is missing
  if (x->absent) return {};
  return x->kind == TensorSpec::kMatrix ? std::vector<int64_t>{x->m.rows, x->m.cols} : x->dims;
}

void Weights::set(Role r, int32_t layer, const Matrix &m) {
  Slot &x = slot(r, layer, TensorSpec::kMatrix, "set");
  if (x.absent) throw std::logic_error(std::string("Weights::set: ") + role_name(r) + " is absent by the config");
  if (m.rows != x.m.rows || m.cols != x.m.cols)
    throw std::logic_error(std::string("Weights::set: ") + role_name(r) + " is not of its declared shape");
  x.m = m;
}

void Weights::set(Role r, int32_t layer, std::vector<float> v) {
  Slot &x = slot(r, layer, TensorSpec::kVector, "set");
  if (x.absent) throw std::logic_error(std::string("Weights::set: ") + role_name(r) + " is absent by the config");
  if (int64_t(v.size()) != x.n)
    throw std::logic_error(std::string("Weights::set: ") + role_name(r) + " is not of its declared length");
  x.v = std::move(v);
}

Weights shape_weights(const ModelConfig &c, const WeightSchema &s) {
  // The dtype the config declares: the CUDA plan's sizing follows it (our GEMMs fuse a bf16 SwiGLU layer and need
  // no gate|up scratch; an fp16 or fp32 one keeps it). A checkpoint whose tensors are not what its config says
  // gets an estimate off by that scratch.
  const DType dt = c.torch_dtype == "float32" ? DType::F32 : c.torch_dtype == "float16" ? DType::F16 : DType::BF16;
  Weights w(s, dt);
  for (const TensorSpec &t : s.tensors) {
    if (t.absent || (s.tied_lm_head && t.role == Role::kLmHead)) continue;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    w.n_params += n;
    w.bytes += n * int64_t(dtype_size(dt));
  }
  return w;
}

}  // namespace vt
