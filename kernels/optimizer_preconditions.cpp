// optimizer_preconditions.cpp: the checks of optimizer_preconditions.h.
#include "kernels/optimizer_preconditions.h"

#include "kernels/error.h"

namespace ddp {

void require_sgd_buffers(const SgdParams& params, const SgdGrads& grads, const float* momentum_fp32, size_t count) {
  if (count == 0) return;  // an empty range: null buffers are expected (see the header)
  DDP_REQUIRE(grads.fp32 != nullptr || grads.lowp != nullptr, "sgd_update: no gradients");
  DDP_REQUIRE(momentum_fp32 != nullptr || params.momentum == 0.0f, "sgd_update: momentum != 0 needs a momentum buffer");
}

void require_adamw_buffers(const AdamWBuffers& buffers, size_t count) {
  if (count == 0) return;
  DDP_REQUIRE(buffers.grads_fp32 != nullptr || buffers.grads_lowp != nullptr, "adamw_update: no gradients");
}

}  // namespace ddp
