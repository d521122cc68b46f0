// mixed_precision_optimizer.cpp
#include "trainer/optim/mixed_precision_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/error.h"
#include "kernels/ops/adamw.h"
#include "kernels/ops/l2_norm.h"
#include "kernels/ops/sgd.h"
#include "kernels/ops/unscale.h"

namespace ddp {

MixedPrecisionOptimizer::MixedPrecisionOptimizer(Backend& backend, ParameterStore& params,
                                                 const OptimizerConfig& config)
    : backend_(backend), params_(params), config_(config), grad_norm_(backend, 1) {
  if (config_.kind == OptimizerKind::AdamW) params_.allocate_adamw_state();
}

MixedPrecisionOptimizer::MixedPrecisionOptimizer(Backend& backend, ParameterStore& params,
                                                 const OptimizerConfig& config, Communicator& comm,
                                                 const ShardLayout& layout)
    : MixedPrecisionOptimizer(backend, params, config) {
  DDP_REQUIRE(layout.total_count() == params.count() && layout.world_size() == comm.shard_size() &&
                  layout.range(comm.shard_rank()) == params.owned(),
              "MixedPrecisionOptimizer: the shard layout is not the store's");
  shards_.emplace(Shards{comm, layout});
}

double MixedPrecisionOptimizer::global_grad_norm() {
  L2NormFp32 l2;
  l2.x = params_.grads_fp32.data();
  l2.count = params_.owned_count();
  l2.norm = grad_norm_.data();
  l2_norm_fp32(backend_, l2);
  float norm = 0.0f;
  backend_.copy_to_host(&norm, grad_norm_.data(), sizeof(norm));
  if (!shards_) return norm;
  // The ranges' squared norms, summed in double over the shard group (every
  // replica holds the same gradients). A float's square is exact in double,
  // so one rank's norm comes back unchanged.
  const double own = static_cast<double>(norm);
  return std::sqrt(shards_->comm.allreduce_sum_host_shard_group(own * own));
}

StepOutcome MixedPrecisionOptimizer::step(StepStatus* status, bool want_norm) {
  StepOutcome out;
  out.grad_norm = std::numeric_limits<double>::quiet_NaN();
  const ShardRange owned = params_.owned();
  const ScalarArg inv_scale = ScalarArg::at(&status->inv_scale);
  // Clipping and logging need the unscaled gradients as a whole (their L2
  // norm): unscale into the FP32 buffer. Otherwise two fused passes: a check
  // that reads only the FP16 gradients, then the update unscaling on the
  // fly. Both paths give the same bits (unscale_element).
  const bool need_fp32 = needs_host(want_norm);
  if (fp32_sums_) {
    UnscaleFp32 unscale;
    unscale.grads_in = params_.grads_fp32.data();
    unscale.grads_out = params_.grads_fp32.data();
    unscale.count = owned.count();
    unscale.inv_scale = inv_scale;
    unscale.nonfinite_flag = &status->nonfinite;
    unscale_fp32(backend_, unscale);
  } else {
    UnscaleLowpToFp32 unscale;
    unscale.grads_lowp = params_.owned_grads_lowp();
    unscale.grads_fp32 = need_fp32 ? params_.grads_fp32.data() : nullptr;
    unscale.count = owned.count();
    unscale.inv_scale = inv_scale;
    unscale.nonfinite_flag = &status->nonfinite;
    unscale_lowp_to_fp32(backend_, unscale);
  }
  // An Inf in one rank's range skips the step on every rank.
  if (shards_) shards_->comm.allreduce_max_int32(&status->nonfinite, 1);

  float clip_coef = 1.0f;
  if (need_fp32) {
    int32_t flag = 0;
    backend_.copy_to_host(&flag, &status->nonfinite, sizeof(flag));
    out.skip_known = true;
    out.skipped = flag != 0;
    if (!out.skipped) {
      const double norm = global_grad_norm();
      out.grad_norm = norm;
      // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
      if (config_.clip_grad_norm > 0.0)
        clip_coef = static_cast<float>(std::min(1.0, config_.clip_grad_norm / (norm + 1e-6)));
    }
  }
  update(status, need_fp32 || fp32_sums_, clip_coef);
  // Every rank's updated range to every rank (a skipped step re-sends the
  // unchanged weights: the decision is on the device, the host never waits).
  // Stage 3 holds its range alone: the layers gather what they read.
  if (shards_ && !params_.weights_sharded() && !weight_gather_deferred_) {
    shards_->comm.allgather_lowp(params_.weights_lowp.data() + owned.begin, params_.weights_lowp.data(),
                                 shards_->layout);
    elements_gathered_ += params_.count();
  }
  return out;
}

void MixedPrecisionOptimizer::update(StepStatus* status, bool fp32_grads, float clip_coef) {
  // The FP32 buffers hold the owned range from their element 0; the FP16
  // ones the whole layout, read from the range's start.
  const size_t count = params_.owned_count();
  lowp16* const grads_lowp = params_.owned_grads_lowp();
  lowp16* const weights_lowp = params_.owned_weights_lowp();
  const ScalarArg inv_scale = ScalarArg::at(&status->inv_scale);
  if (config_.kind == OptimizerKind::AdamW) {
    AdamWUpdate adamw;
    AdamWParams& a = adamw.params;
    a.lr_ptr = &status->lr;
    a.steps_taken = &status->steps_taken;
    a.beta1 = config_.beta1;
    a.beta2 = config_.beta2;
    a.eps = config_.eps;
    a.weight_decay = config_.weight_decay;
    a.grad_multiplier = clip_coef;
    AdamWBuffers& b = adamw.buffers;
    b.grads_fp32 = fp32_grads ? params_.grads_fp32.data() : nullptr;
    b.grads_lowp = grads_lowp;
    b.master_fp32 = params_.master_weights_fp32.data();
    b.exp_avg_fp32 = params_.momentum_fp32.data();
    b.exp_avg_sq_fp32 = params_.second_moment_fp32.data();
    b.weights_lowp = weights_lowp;
    b.decay_mask = params_.weight_decay_mask.data();
    adamw.inv_scale = inv_scale;
    adamw.offset = 0;
    adamw.count = count;
    adamw.skip_flag = &status->nonfinite;
    adamw_update(backend_, adamw);
    return;
  }
  SgdUpdate sgd;
  sgd.params.lr_ptr = &status->lr;
  sgd.params.momentum = static_cast<float>(config_.momentum);
  sgd.params.dampening = static_cast<float>(config_.dampening);
  sgd.params.weight_decay = static_cast<float>(config_.weight_decay);
  sgd.params.nesterov = config_.nesterov;
  sgd.params.momentum_initialized = &status->momentum_initialized;
  sgd.params.grad_multiplier = clip_coef;
  sgd.grads = fp32_grads ? SgdGrads::unscaled(params_.grads_fp32.data()) : SgdGrads::scaled(grads_lowp, inv_scale);
  sgd.master_fp32 = params_.master_weights_fp32.data();
  sgd.momentum_fp32 = params_.momentum_fp32.data();
  sgd.weights_lowp = weights_lowp;
  sgd.count = count;
  sgd.skip_flag = &status->nonfinite;
  sgd_update(backend_, sgd);
}

}  // namespace ddp
