// mixed_precision_optimizer.h: the step after the gradients are summed:
// unscale FP16 -> FP32 by 1/(S * divisor) with an Inf/NaN check into a
// device-side flag, optional clipping by the global L2 norm of the unscaled
// gradients, and SGD on the FP32 masters (which the flag turns into a no-op)
// followed by the FP16 re-cast. The skip decision is the flag: a skipped
// step changes no weight and no momentum.
#pragma once

#include "kernels/buffer.h"
#include "trainer/parameter_store.h"

namespace ddp {

struct OptimizerConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  double clip_grad_norm = 0.0;  // 0: off
};

struct StepOutcome {
  bool skipped = false;
  double grad_norm = 0.0;  // of the unscaled, summed-and-averaged gradients; NaN when not computed
};

class MixedPrecisionOptimizer {
 public:
  MixedPrecisionOptimizer(Backend& backend, ParameterStore& params, const OptimizerConfig& config);

  // grads_fp16 hold loss-scaled gradients summed over ranks; divisor is the
  // number of ranks (their average is wanted). want_norm computes grad_norm
  // even without clipping (for logging).
  StepOutcome step(double lr, double loss_scale, double divisor, bool want_norm);

  bool momentum_initialized() const { return momentum_initialized_; }
  void set_momentum_initialized(bool v) { momentum_initialized_ = v; }

 private:
  Backend& backend_;
  ParameterStore& params_;
  OptimizerConfig config_;
  bool momentum_initialized_ = false;
  Buffer<int32_t> nonfinite_flag_;  // (1) set by unscale, read by SGD
  Buffer<float> grad_norm_;         // (1)
};

}  // namespace ddp
