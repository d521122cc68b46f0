// mixed_precision_optimizer.h: the step after the gradients are summed:
// unscale FP16 -> FP32 by the step's 1/(S * divisor) with an Inf/NaN check
// into the device-resident step state (step_status.h), optional clipping by
// the global L2 norm of the unscaled gradients, and SGD or AdamW on the FP32
// masters (which the flag turns into a no-op) followed by the FP16 re-cast.
// The skip decision is the flag: a skipped step changes no weight, no
// optimizer state and not AdamW's step count t (StepStatus::steps_taken,
// advanced on the device by step_status_finish only for a step taken).
//
// Without clipping or a wanted norm the step is two fused passes that read
// their scalars (1/S, lr, momentum initialised or t, skip) from the step
// state when they run: the host queues them and never waits, so the step
// can be captured in a CUDA graph.
//
// Weight decay: SGD applies --weight-decay to every tensor (one
// torch.optim.SGD parameter group, L2 added to the gradient; unchanged from
// before AdamW). AdamW decays (decoupled, torch.optim.AdamW) only the
// tensors the registry marks weight_decay (the MLP's weights, not its
// biases), through the store's per-element mask.
#pragma once

#include <cstddef>

#include "kernels/buffer.h"
#include "trainer/models/parameter_store.h"
#include "trainer/optim/optimizer_kind.h"

namespace ddp {

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Sgd;
  double momentum = 0.0;  // SGD
  double dampening = 0.0;
  bool nesterov = false;
  double beta1 = 0.9;     // AdamW
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double clip_grad_norm = 0.0;  // 0: off
};

struct StepOutcome {
  bool skip_known = false;  // the host read the flag (clipping / norm wanted); else see StepStatus
  bool skipped = false;
  double grad_norm = 0.0;  // of the unscaled, summed-and-averaged gradients; NaN when not computed
};

class MixedPrecisionOptimizer {
 public:
  // AdamW allocates the store's second moment and decay mask here.
  MixedPrecisionOptimizer(Backend& backend, ParameterStore& params, const OptimizerConfig& config);

  // grads_fp16 hold loss-scaled gradients summed over ranks; `status` (in
  // the backend's memory) holds this step's prepared scalars and receives
  // the Inf/NaN flag. want_norm computes grad_norm even without clipping
  // (for logging); it and clipping read the flag and the norm on the host.
  StepOutcome step(StepStatus* status, bool want_norm);

  // The elements [begin, end) of the flat layout the update writes (a
  // rank's shard; default: all). The check and the norm still read every
  // gradient, so the skip decision and clipping stay global.
  void set_update_range(size_t begin, size_t end);

  // True when step() waits for the device (clipping or a wanted norm).
  bool needs_host(bool want_norm) const { return config_.clip_grad_norm > 0.0 || want_norm; }

 private:
  void update(StepStatus* status, bool fp32_grads, float clip_coef);

  Backend& backend_;
  ParameterStore& params_;
  OptimizerConfig config_;
  size_t update_begin_ = 0, update_end_ = 0;
  Buffer<float> grad_norm_;  // (1)
};

}  // namespace ddp
