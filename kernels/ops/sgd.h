// sgd.h: the SGD step (torch.optim.SGD's semantics: elementwise_math.h,
// sgd_update_element) on the FP32 master weights and momentum, then the
// 16-bit weights re-cast from the masters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/elementwise_math.h"
#include "kernels/optimizer_buffers.h"
#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"
#include "kernels/step_status.h"

namespace ddp {

// Per element: the step on master_fp32[i] and momentum_fp32[i], then
// weights_lowp[i] = fp16(master_fp32[i]). Does nothing at all when
// *skip_flag != 0. params.lr_ptr and params.momentum_initialized, where
// set, are read when the step runs (the device-resident step state). With
// 16-bit gradients (SgdGrads::scaled) each is unscaled on the fly
// (unscale_element): bitwise equal to unscale_lowp_to_fp32 (unscale.h) and
// then the step on the FP32 gradients, the fused step's second pass with no
// FP32 gradient buffer. With count 0 nothing is read or written and every
// pointer may be null (an empty --zero range); otherwise a missing buffer
// throws ddp::Error on both rows alike (optimizer_preconditions.h).
struct SgdUpdate {
  static constexpr const char* kName = "sgd_update";
  SgdParams params;
  SgdGrads grads;
  float* master_fp32 = nullptr;    // [count]
  float* momentum_fp32 = nullptr;  // [count]; may be null where params.momentum == 0
  lowp16* weights_lowp = nullptr;  // [count]
  size_t count = 0;
  const int32_t* skip_flag = nullptr;  // one int32 of the backend's memory, or null: never skip
};
void sgd_update_cpu(CpuBackend& cpu, const SgdUpdate& op);
void sgd_update_cuda(CudaOpContext& cuda, const SgdUpdate& op);
inline void sgd_update(Backend& backend, const SgdUpdate& op) {
  run_op(backend, op, sgd_update_cpu, DDP_CUDA_ROW(sgd_update_cuda));
}

}  // namespace ddp
