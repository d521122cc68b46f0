// mixed_precision_optimizer.cpp
#include "trainer/mixed_precision_optimizer.h"

#include <cmath>
#include <limits>

namespace ddp {

MixedPrecisionOptimizer::MixedPrecisionOptimizer(Backend& backend, ParameterStore& params,
                                                 const OptimizerConfig& config)
    : backend_(backend), params_(params), config_(config), nonfinite_flag_(backend, 1), grad_norm_(backend, 1) {}

StepOutcome MixedPrecisionOptimizer::step(double lr, double loss_scale, double divisor, bool want_norm) {
  StepOutcome out;
  out.grad_norm = std::numeric_limits<double>::quiet_NaN();
  const size_t n = params_.count();
  nonfinite_flag_.zero();
  const float inv_scale = static_cast<float>(1.0 / (loss_scale * divisor));
  // Clipping and logging need the unscaled gradients as a whole (their L2
  // norm): unscale into the FP32 buffer. Otherwise two fused passes: a check
  // that reads only the FP16 gradients, then SGD unscaling on the fly. Both
  // paths give the same bits (unscale_element).
  const bool need_fp32 = config_.clip_grad_norm > 0.0 || want_norm;
  backend_.unscale_fp16_to_fp32(params_.grads_fp16.data(), need_fp32 ? params_.grads_fp32.data() : nullptr, n,
                                inv_scale, nonfinite_flag_.data());
  int32_t flag = 0;
  backend_.copy_to_host(&flag, nonfinite_flag_.data(), sizeof(flag));
  out.skipped = flag != 0;

  float clip_coef = 1.0f;
  if (!out.skipped && need_fp32) {
    backend_.l2_norm_fp32(params_.grads_fp32.data(), n, grad_norm_.data());
    float norm = 0.0f;
    backend_.copy_to_host(&norm, grad_norm_.data(), sizeof(norm));
    out.grad_norm = norm;
    // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
    if (config_.clip_grad_norm > 0.0)
      clip_coef = static_cast<float>(std::min(1.0, config_.clip_grad_norm / (static_cast<double>(norm) + 1e-6)));
  }

  SgdParams sgd;
  sgd.lr = static_cast<float>(lr);
  sgd.momentum = static_cast<float>(config_.momentum);
  sgd.dampening = static_cast<float>(config_.dampening);
  sgd.weight_decay = static_cast<float>(config_.weight_decay);
  sgd.nesterov = config_.nesterov;
  sgd.first_step = !momentum_initialized_;
  sgd.grad_multiplier = clip_coef;
  if (need_fp32)
    backend_.sgd_update(sgd, params_.grads_fp32.data(), params_.master_weights_fp32.data(),
                        params_.momentum_fp32.data(), params_.weights_fp16.data(), n, nonfinite_flag_.data());
  else
    backend_.sgd_update_fp16_grads(sgd, params_.grads_fp16.data(), inv_scale, params_.master_weights_fp32.data(),
                                   params_.momentum_fp32.data(), params_.weights_fp16.data(), n,
                                   nonfinite_flag_.data());
  if (!out.skipped) momentum_initialized_ = true;
  return out;
}

}  // namespace ddp
