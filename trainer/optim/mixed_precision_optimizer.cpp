// mixed_precision_optimizer.cpp
#include "trainer/optim/mixed_precision_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/error.h"

namespace ddp {

MixedPrecisionOptimizer::MixedPrecisionOptimizer(Backend& backend, ParameterStore& params,
                                                 const OptimizerConfig& config)
    : backend_(backend), params_(params), config_(config), update_end_(params.count()), grad_norm_(backend, 1) {
  if (config_.kind == OptimizerKind::AdamW) params_.allocate_adamw_state();
}

void MixedPrecisionOptimizer::set_update_range(size_t begin, size_t end) {
  DDP_REQUIRE(begin <= end && end <= params_.count(), "set_update_range: not a range of the flat layout");
  update_begin_ = begin, update_end_ = end;
}

StepOutcome MixedPrecisionOptimizer::step(StepStatus* status, bool want_norm) {
  StepOutcome out;
  out.grad_norm = std::numeric_limits<double>::quiet_NaN();
  const size_t n = params_.count();
  const ScalarArg inv_scale = ScalarArg::at(&status->inv_scale);
  // Clipping and logging need the unscaled gradients as a whole (their L2
  // norm): unscale into the FP32 buffer. Otherwise two fused passes: a check
  // that reads only the FP16 gradients, then the update unscaling on the
  // fly. Both paths give the same bits (unscale_element).
  const bool need_fp32 = needs_host(want_norm);
  backend_.unscale_fp16_to_fp32(params_.grads_fp16.data(), need_fp32 ? params_.grads_fp32.data() : nullptr, n,
                                inv_scale, &status->nonfinite);

  float clip_coef = 1.0f;
  if (need_fp32) {
    int32_t flag = 0;
    backend_.copy_to_host(&flag, &status->nonfinite, sizeof(flag));
    out.skip_known = true;
    out.skipped = flag != 0;
    if (!out.skipped) {
      backend_.l2_norm_fp32(params_.grads_fp32.data(), n, grad_norm_.data());
      float norm = 0.0f;
      backend_.copy_to_host(&norm, grad_norm_.data(), sizeof(norm));
      out.grad_norm = norm;
      // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
      if (config_.clip_grad_norm > 0.0)
        clip_coef = static_cast<float>(std::min(1.0, config_.clip_grad_norm / (static_cast<double>(norm) + 1e-6)));
    }
  }
  update(status, need_fp32, clip_coef);
  return out;
}

void MixedPrecisionOptimizer::update(StepStatus* status, bool fp32_grads, float clip_coef) {
  const size_t begin = update_begin_, count = update_end_ - update_begin_;
  const ScalarArg inv_scale = ScalarArg::at(&status->inv_scale);
  if (config_.kind == OptimizerKind::AdamW) {
    AdamWParams a;
    a.lr_ptr = &status->lr;
    a.steps_taken = &status->steps_taken;
    a.beta1 = config_.beta1, a.beta2 = config_.beta2, a.eps = config_.eps;
    a.weight_decay = config_.weight_decay;
    a.grad_multiplier = clip_coef;
    AdamWBuffers b;
    b.grads_fp32 = fp32_grads ? params_.grads_fp32.data() : nullptr;
    b.grads_fp16 = params_.grads_fp16.data();
    b.master_fp32 = params_.master_weights_fp32.data();
    b.exp_avg_fp32 = params_.momentum_fp32.data();
    b.exp_avg_sq_fp32 = params_.second_moment_fp32.data();
    b.weights_fp16 = params_.weights_fp16.data();
    b.decay_mask = params_.weight_decay_mask.data();
    backend_.adamw_update(a, b, inv_scale, begin, count, &status->nonfinite);
    return;
  }
  SgdParams sgd;
  sgd.lr_ptr = &status->lr;
  sgd.momentum = static_cast<float>(config_.momentum);
  sgd.dampening = static_cast<float>(config_.dampening);
  sgd.weight_decay = static_cast<float>(config_.weight_decay);
  sgd.nesterov = config_.nesterov;
  sgd.momentum_initialized = &status->momentum_initialized;
  sgd.grad_multiplier = clip_coef;
  if (fp32_grads)
    backend_.sgd_update(sgd, params_.grads_fp32.data() + begin, params_.master_weights_fp32.data() + begin,
                        params_.momentum_fp32.data() + begin, params_.weights_fp16.data() + begin, count,
                        &status->nonfinite);
  else
    backend_.sgd_update_fp16_grads(sgd, params_.grads_fp16.data() + begin, inv_scale,
                                   params_.master_weights_fp32.data() + begin, params_.momentum_fp32.data() + begin,
                                   params_.weights_fp16.data() + begin, count, &status->nonfinite);
}

}  // namespace ddp
