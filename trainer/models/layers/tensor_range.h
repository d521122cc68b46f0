// tensor_range.h: registry tensors [first, end) a layer owns, and the ranges
// of layers side by side joined, so a model reports the gradients a layer
// finished (Model::backward's `ready`) from the layers themselves; a
// registry whose order does not put them side by side is refused when the
// model is built, not reported wrong.
#pragma once

#include <cstddef>

#include "kernels/error.h"

namespace ddp {

struct TensorRange {
  size_t first = 0;
  size_t end = 0;
};

// The range covering `a` and `b`, which must be adjacent (in either order).
inline TensorRange joined(TensorRange a, TensorRange b) {
  DDP_REQUIRE(a.end == b.first || b.end == a.first, "joined: the layers' tensors are not adjacent in the registry");
  return a.end == b.first ? TensorRange{a.first, b.end} : TensorRange{b.first, a.end};
}

}  // namespace ddp
