// adamw.h: the AdamW step (torch.optim.AdamW's semantics: adamw_math.h,
// adamw_update_element) on the FP32 master weights and moments, then the
// 16-bit weights re-cast from the masters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/adamw_math.h"
#include "kernels/optimizer_buffers.h"
#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"
#include "kernels/step_status.h"

namespace ddp {

// The step on the elements [offset, offset + count) of every buffer (the
// pointers are the buffers' starts; a rank's shard is such a range), then
// weights_lowp = fp16(master) there; nothing outside the range is read or
// written. Does nothing at all when *skip_flag != 0. params.lr_ptr and
// params.steps_taken, where set, are read when the step runs. With
// buffers.grads_fp32 null the 16-bit gradients are unscaled by inv_scale on
// the fly: bitwise equal to unscale_lowp_to_fp32 and then the step on the
// FP32 gradients. With count 0 every pointer may be null, as for SGD;
// otherwise no gradients at all throws ddp::Error.
struct AdamWUpdate {
  static constexpr const char* kName = "adamw_update";
  AdamWParams params;
  AdamWBuffers buffers;
  ScalarArg inv_scale = 1.0f;
  size_t offset = 0;
  size_t count = 0;
  const int32_t* skip_flag = nullptr;  // one int32 of the backend's memory, or null: never skip
};
void adamw_update_cpu(CpuBackend& cpu, const AdamWUpdate& op);
void adamw_update_cuda(CudaOpContext& cuda, const AdamWUpdate& op);
inline void adamw_update(Backend& backend, const AdamWUpdate& op) {
  run_op(backend, op, adamw_update_cpu, DDP_CUDA_ROW(adamw_update_cuda));
}

}  // namespace ddp
