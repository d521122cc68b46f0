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
//
// Sharded (ZeRO stage 1, the store owns one range of the layout): the
// gradients' sums are valid on the owned range only (a reduce-scatter), so
// the check, the norm and the update run there; the Inf/NaN flag then goes
// through a one-integer MAX all-reduce on the backend's memory (no host
// round trip), the squared norms through a host sum, and after the update
// the FP16 weights are all-gathered: every rank takes the same decision
// and ends the step with the same FP16 weights.
//
// FP32 sums (--grad-reduce-dtype fp32, read_fp32_sums): the reducer leaves
// the loss-scaled sums in FP32 in grads_fp32 (the owned range), and the
// check unscales them there in place (the unscale_fp32 op, kernels/ops/unscale.h): the update
// then reads FP32 gradients. At one rank this is the 16-bit path's
// arithmetic (an exact widening, one multiply), so the same bits.
#pragma once

#include <cstddef>
#include <optional>

#include "comm/communicator.h"
#include "kernels/buffer.h"
#include "trainer/params/parameter_store.h"
#include "trainer/optim/optimizer_kind.h"

namespace ddp {

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Sgd;
  double momentum = 0.0;  // SGD
  double dampening = 0.0;
  bool nesterov = false;
  double beta1 = 0.9;  // AdamW
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
  // Sharded: `layout` is the store's (params.owned() is its range of
  // comm.shard_rank(), over the shard group); the collectives above go
  // through `comm`.
  MixedPrecisionOptimizer(Backend& backend, ParameterStore& params, const OptimizerConfig& config, Communicator& comm,
                          const ShardLayout& layout);

  // grads_lowp hold loss-scaled gradients summed over ranks (grads_fp32
  // with read_fp32_sums); `status` (in
  // the backend's memory) holds this step's prepared scalars and receives
  // the Inf/NaN flag. want_norm computes grad_norm even without clipping
  // (for logging); it and clipping read the flag and the norm on the host.
  StepOutcome step(StepStatus* status, bool want_norm);

  // FP16 elements all-gathered so far (sharded: the whole layout per step).
  size_t elements_gathered() const { return elements_gathered_; }
  // Stages 1 and 2: leave the all-gather of the updated FP16 weights to the
  // caller (LayerShards::start_updated_weight_gathers, overlapped with the
  // next forward) instead of running it at the end of step().
  void defer_weight_gather(bool deferred) { weight_gather_deferred_ = deferred; }
  // The gradients arrive summed in FP32 in the store's grads_fp32, still
  // loss-scaled (the header's "FP32 sums").
  void read_fp32_sums(bool on) { fp32_sums_ = on; }

  // True when step() waits for the device (clipping or a wanted norm).
  bool needs_host(bool want_norm) const { return config_.clip_grad_norm > 0.0 || want_norm; }

 private:
  void update(StepStatus* status, bool fp32_grads, float clip_coef);
  // The global L2 norm of the unscaled gradients (sharded: of every rank's range).
  double global_grad_norm();

  struct Shards {
    Communicator& comm;
    ShardLayout layout;
  };

  Backend& backend_;
  ParameterStore& params_;
  OptimizerConfig config_;
  std::optional<Shards> shards_;  // empty: unsharded
  Buffer<float> grad_norm_;       // (1)
  size_t elements_gathered_ = 0;
  bool weight_gather_deferred_ = false;
  bool fp32_sums_ = false;
};

}  // namespace ddp
