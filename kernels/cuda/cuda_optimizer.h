// cuda_optimizer.h: launchers for the optimizer-side kernels: unscale with
// the Inf/NaN check, the L2 norm (for clipping), the SGD and AdamW steps; semantics
// as the Backend methods of the same name (backend.h). Flags, norms and
// skip flags are device pointers, so none of these waits for the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/elementwise_math.h"
#include "kernels/lowp_codec.h"
#include "kernels/step_status.h"

namespace ddp {

// Each launcher reads and writes the 16-bit buffers in precision p (the
// backend's).

// nonfinite_flag may be null (no check reported).
void launch_unscale_lowp_to_fp32(cudaStream_t stream, Precision p, const lowp16* grads_lowp, float* grads_fp32,
                                 size_t count, ScalarArg inv_scale, int32_t* nonfinite_flag);

// grads_out = grads_in * inv_scale (in place allowed), the flag as above.
void launch_unscale_fp32(cudaStream_t stream, const float* grads_in, float* grads_out, size_t count,
                         ScalarArg inv_scale, int32_t* nonfinite_flag);

size_t l2_norm_scratch_bytes();
void launch_l2_norm_fp32(cudaStream_t stream, const float* x, size_t count, float* norm, void* scratch);

// momentum_fp32 may be null when params.momentum == 0; weights_lowp may be
// null (no 16-bit re-cast); skip_flag may be null (never skip). With count 0
// every pointer may be null (an empty --zero range) and nothing is launched;
// the buffer checks are optimizer_preconditions.h's, the CPU backend's too.
void launch_sgd_update_lowp_grads(cudaStream_t stream, Precision p, const SgdParams& params, const lowp16* grads_lowp,
                                  ScalarArg inv_scale, float* master_fp32, float* momentum_fp32, lowp16* weights_lowp,
                                  size_t count, const int32_t* skip_flag);
void launch_sgd_update(cudaStream_t stream, Precision p, const SgdParams& params, const float* grads_fp32,
                       float* master_fp32, float* momentum_fp32, lowp16* weights_lowp, size_t count,
                       const int32_t* skip_flag);

void launch_adamw_update(cudaStream_t stream, Precision p, const AdamWParams& params, const AdamWBuffers& buffers,
                         ScalarArg inv_scale, size_t offset, size_t count, const int32_t* skip_flag);

// One-thread kernels applying step_status_prepare / step_status_finish
// (step_status.h) to the device-resident state.
void launch_step_status_prepare(cudaStream_t stream, StepStatus* status, double backward_divisor,
                                double unscale_divisor, float lr);
void launch_step_status_finish(cudaStream_t stream, const LossScaleRule& rule, StepStatus* status);

}  // namespace ddp
