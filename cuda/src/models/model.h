// A model: a weight schema (which matrices and vectors make each layer, bound through ModelOps when it is built)
// and a composition of ops (forward). Written once over models/model_ops.h, run by every backend: the decoder of
// a backend builds the model over its own ops and runs forward() each step, then its lm_head (head()) over the
// rows of output() whose logits are wanted. models/registry.h says which model runs which architecture.
#pragma once

#include "models/model_ops.h"

namespace vt {

class Model {
 public:
  virtual ~Model() = default;
  // One step over the rows the decoder gave `ops`; afterwards output() holds each row's final-normed hidden state.
  virtual void forward(ModelOps &ops) const = 0;
  virtual Tensor output() const = 0;
  virtual Linear head() const = 0;  // the (vocab, hidden) lm_head: the embedding's handle when tied
};

}  // namespace vt
