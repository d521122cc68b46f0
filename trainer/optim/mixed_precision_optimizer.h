// mixed_precision_optimizer.h: the step after the gradients are summed:
// unscale FP16 -> FP32 by the step's 1/(S * divisor) with an Inf/NaN check
// into the device-resident step state (step_status.h), optional clipping by
// the global L2 norm of the unscaled gradients, and SGD on the FP32 masters
// (which the flag turns into a no-op) followed by the FP16 re-cast. The skip
// decision is the flag: a skipped step changes no weight and no momentum.
//
// Without clipping or a wanted norm the step is two fused passes that read
// their scalars (1/S, lr, momentum initialised, skip) from the step state
// when they run: the host queues them and never waits, so the step can be
// captured in a CUDA graph.
#pragma once

#include "kernels/buffer.h"
#include "trainer/models/parameter_store.h"

namespace ddp {

struct OptimizerConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  double clip_grad_norm = 0.0;  // 0: off
};

struct StepOutcome {
  bool skip_known = false;  // the host read the flag (clipping / norm wanted); else see StepStatus
  bool skipped = false;
  double grad_norm = 0.0;  // of the unscaled, summed-and-averaged gradients; NaN when not computed
};

class MixedPrecisionOptimizer {
 public:
  MixedPrecisionOptimizer(Backend& backend, ParameterStore& params, const OptimizerConfig& config);

  // grads_fp16 hold loss-scaled gradients summed over ranks; `status` (in
  // the backend's memory) holds this step's prepared scalars and receives
  // the Inf/NaN flag. want_norm computes grad_norm even without clipping
  // (for logging); it and clipping read the flag and the norm on the host.
  StepOutcome step(StepStatus* status, bool want_norm);

  // True when step() waits for the device (clipping or a wanted norm).
  bool needs_host(bool want_norm) const { return config_.clip_grad_norm > 0.0 || want_norm; }

 private:
  Backend& backend_;
  ParameterStore& params_;
  OptimizerConfig config_;
  Buffer<float> grad_norm_;  // (1)
};

}  // namespace ddp
