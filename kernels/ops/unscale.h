// unscale.h: the unscale of the gradients with the Inf/NaN check that
// decides whether a step is taken (dynamic loss scaling): from the 16-bit
// gradients, or from gradients summed in FP32 (--grad-reduce-dtype fp32).
// The flag is only ever set, never cleared (the caller zeroes it per step),
// so several passes can share one; it is written from the backend's
// memory, so no pass waits for the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"
#include "kernels/step_status.h"

namespace ddp {

// grads_fp32[i] = float(grads_lowp[i]) * inv_scale (elementwise_math.h:
// unscale_element, the fused optimizer steps' bits); if any result is
// Inf/NaN, *nonfinite_flag = 1. grads_fp32 null: the check alone, a pass
// that reads only the 16-bit gradients (the fused step's first pass).
struct UnscaleLowpToFp32 {
  static constexpr const char* kName = "unscale_lowp_to_fp32";
  const lowp16* grads_lowp = nullptr;  // [count]
  float* grads_fp32 = nullptr;         // [count], or null
  size_t count = 0;
  ScalarArg inv_scale = 1.0f;         // a value, or ScalarArg::at a float of the backend's memory
  int32_t* nonfinite_flag = nullptr;  // one int32 of the backend's memory, or null (no check reported)
};
void unscale_lowp_to_fp32_cpu(CpuBackend& cpu, const UnscaleLowpToFp32& op);
void unscale_lowp_to_fp32_cuda(CudaOpContext& cuda, const UnscaleLowpToFp32& op);
inline void unscale_lowp_to_fp32(Backend& backend, const UnscaleLowpToFp32& op) {
  run_op(backend, op, unscale_lowp_to_fp32_cpu, DDP_CUDA_ROW(unscale_lowp_to_fp32_cuda));
}

// grads_out[i] = grads_in[i] * inv_scale in FP32 (in place when they are
// the same buffer), with the flag as above. Of a widened 16-bit value it
// gives unscale_element's bits.
struct UnscaleFp32 {
  static constexpr const char* kName = "unscale_fp32";
  const float* grads_in = nullptr;  // [count]
  float* grads_out = nullptr;       // [count], may be grads_in
  size_t count = 0;
  ScalarArg inv_scale = 1.0f;
  int32_t* nonfinite_flag = nullptr;
};
void unscale_fp32_cpu(CpuBackend& cpu, const UnscaleFp32& op);
void unscale_fp32_cuda(CudaOpContext& cuda, const UnscaleFp32& op);
inline void unscale_fp32(Backend& backend, const UnscaleFp32& op) {
  run_op(backend, op, unscale_fp32_cpu, DDP_CUDA_ROW(unscale_fp32_cuda));
}

}  // namespace ddp
