// optimizer_buffers.h: the buffers the optimizer steps read and write
// (ops/sgd.h, ops/adamw.h), as plain data below the ops, so the CPU loops
// (cpu/cpu_adamw.h) and the buffer checks (optimizer_preconditions.h) use
// them without including an op.
#pragma once

#include <cstdint>

#include "kernels/lowp16.h"
#include "kernels/step_status.h"

namespace ddp {

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

// The flat buffers one AdamW step reads and writes (all in the registry's
// layout, indexed alike).
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

}  // namespace ddp
