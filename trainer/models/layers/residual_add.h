// residual_add.h: the residual stream's add, out = x + branch (one
// rounding per element: the add_lowp op, kernels/ops/elementwise.h), as the
// GPT's blocks and its incremental decoder do it twice per block. out may
// be x (the in-place x += f(x)).
#pragma once

#include <cstddef>

#include "kernels/ops/elementwise.h"

namespace ddp {

inline void residual_add(Backend& backend, const lowp16* x, const lowp16* branch, lowp16* out, size_t count) {
  AddLowp add;
  add.a = x;
  add.b = branch;
  add.y = out;
  add.count = count;
  add_lowp(backend, add);
}

}  // namespace ddp
