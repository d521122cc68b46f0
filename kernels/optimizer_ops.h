// optimizer_ops.h: the optimizer family of the Backend (backend.h): the
// unscale and check of the FP16 gradients, the norm, the SGD and AdamW
// steps on the FP32 masters, and the device-resident step state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/adamw_math.h"
#include "kernels/elementwise_math.h"
#include "kernels/half.h"
#include "kernels/step_status.h"

namespace ddp {

// The flat buffers one AdamW step reads and writes (all in the registry's
// layout, indexed alike), for Backend::adamw_update.
struct AdamWBuffers {
  // The unscaled FP32 gradients, or null: read grads_lowp and unscale each
  // on the fly (unscale_element), the fused step's second pass.
  const float* grads_fp32 = nullptr;
  const lowp16* grads_lowp = nullptr;
  float* master_fp32 = nullptr;
  float* exp_avg_fp32 = nullptr;     // m
  float* exp_avg_sq_fp32 = nullptr;  // v
  lowp16* weights_lowp = nullptr;    // re-cast from the master after the step
  // Per element: non-zero where weight decay applies (the tensor's registry
  // flag). Null: it applies everywhere.
  const uint8_t* decay_mask = nullptr;
};

// The gradients an SGD step reads: the unscaled FP32 ones, or the 16-bit
// ones (the backend's precision) with the 1/S that unscales them.
struct SgdGrads {
  const float* fp32 = nullptr;
  const lowp16* lowp = nullptr;
  ScalarArg inv_scale = 1.0f;
  static SgdGrads unscaled(const float* grads_fp32) {
    SgdGrads g;
    g.fp32 = grads_fp32;
    return g;
  }
  static SgdGrads scaled(const lowp16* grads_lowp, ScalarArg inv_scale) {
    SgdGrads g;
    g.lowp = grads_lowp;
    g.inv_scale = inv_scale;
    return g;
  }
};

// Implemented by each backend (CPU: cpu_backend.cpp, cpu_adamw.h; CUDA: cuda_optimizer.h).
class OptimizerOps {
 public:
  virtual ~OptimizerOps() = default;

  // grads_fp32 = float(grads_lowp) * inv_scale (unscale_element); if any
  // result is Inf/NaN, sets *nonfinite_flag = 1 (never clears it: the caller
  // zeroes it per step). grads_fp32 may be null: the check alone, a pass
  // that reads only the FP16 gradients (the fused step's first pass).
  virtual void unscale_lowp_to_fp32(const lowp16* grads_lowp, float* grads_fp32, size_t count, ScalarArg inv_scale,
                                    int32_t* nonfinite_flag) = 0;
  // grads_out = grads_in * inv_scale in FP32 (in place when they are the
  // same buffer), with the Inf/NaN flag as above: the unscale and check of
  // gradients summed in FP32 (--grad-reduce-dtype fp32). Of a widened
  // 16-bit value it gives unscale_element's bits.
  virtual void unscale_fp32(const float* grads_in, float* grads_out, size_t count, ScalarArg inv_scale,
                            int32_t* nonfinite_flag) = 0;
  // *norm = sqrt(sum x^2), FP32 accumulation at least (Inf/NaN propagate).
  virtual void l2_norm_fp32(const float* x, size_t count, float* norm) = 0;
  // SGD step (elementwise_math.h: sgd_update_element) on master weights and
  // momentum, then weights_lowp = fp16(master). Does nothing at all when
  // *skip_flag != 0 (skip_flag may be null: never skip). params.lr_ptr and
  // params.momentum_initialized, where set, are read when the step runs.
  // With FP16 gradients (SgdGrads::scaled) each is unscaled on the fly
  // (unscale_element), bitwise equal to unscale_lowp_to_fp32 and then the
  // step on the FP32 gradients: the fused step's second pass, with no FP32
  // gradient buffer written or read. momentum_fp32 may be null where
  // params.momentum == 0. With count 0 nothing is read or written and every
  // pointer may be null (an empty --zero range); otherwise a missing buffer
  // throws ddp::Error (optimizer_preconditions.h, on both backends).
  virtual void sgd_update(const SgdParams& params, const SgdGrads& grads, float* master_fp32, float* momentum_fp32,
                          lowp16* weights_lowp, size_t count, const int32_t* skip_flag) = 0;

  // AdamW step (adamw_math.h: adamw_update_element) on the elements
  // [offset, offset + count) of every buffer of `b` (the pointers are the
  // buffers' starts; a rank's shard is such a range), then weights_lowp =
  // fp16(master) there. Nothing outside the range is read or written. Does
  // nothing at all when *skip_flag != 0 (skip_flag may be null: never skip).
  // params.lr_ptr and params.steps_taken, where set, are read when the step
  // runs. With b.grads_fp32 null the FP16 gradients are unscaled by
  // inv_scale on the fly: bitwise equal to unscale_lowp_to_fp32 and then
  // this with the FP32 gradients. With count 0 every pointer may be null,
  // as for sgd_update; otherwise no gradients at all throws ddp::Error.
  virtual void adamw_update(const AdamWParams& params, const AdamWBuffers& b, ScalarArg inv_scale, size_t offset,
                            size_t count, const int32_t* skip_flag) = 0;

  // ---- device-resident step state (step_status.h) ---------------------------
  // Queued like any kernel: neither waits for the device. status points to
  // one StepStatus in this backend's memory.
  virtual void step_status_prepare(StepStatus* status, double backward_divisor, double unscale_divisor, float lr) = 0;
  virtual void step_status_finish(const LossScaleRule& rule, StepStatus* status) = 0;
};

}  // namespace ddp
