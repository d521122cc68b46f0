// mixed_precision_optimizer.cpp
#include "trainer/optim/mixed_precision_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace ddp {

MixedPrecisionOptimizer::MixedPrecisionOptimizer(Backend& backend, ParameterStore& params,
                                                 const OptimizerConfig& config)
    : backend_(backend), params_(params), config_(config), grad_norm_(backend, 1) {}

StepOutcome MixedPrecisionOptimizer::step(StepStatus* status, bool want_norm) {
  StepOutcome out;
  out.grad_norm = std::numeric_limits<double>::quiet_NaN();
  const size_t n = params_.count();
  const ScalarArg inv_scale = ScalarArg::at(&status->inv_scale);
  // Clipping and logging need the unscaled gradients as a whole (their L2
  // norm): unscale into the FP32 buffer. Otherwise two fused passes: a check
  // that reads only the FP16 gradients, then SGD unscaling on the fly. Both
  // paths give the same bits (unscale_element).
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

  SgdParams sgd;
  sgd.lr_ptr = &status->lr;
  sgd.momentum = static_cast<float>(config_.momentum);
  sgd.dampening = static_cast<float>(config_.dampening);
  sgd.weight_decay = static_cast<float>(config_.weight_decay);
  sgd.nesterov = config_.nesterov;
  sgd.momentum_initialized = &status->momentum_initialized;
  sgd.grad_multiplier = clip_coef;
  if (need_fp32)
    backend_.sgd_update(sgd, params_.grads_fp32.data(), params_.master_weights_fp32.data(),
                        params_.momentum_fp32.data(), params_.weights_fp16.data(), n, &status->nonfinite);
  else
    backend_.sgd_update_fp16_grads(sgd, params_.grads_fp16.data(), inv_scale, params_.master_weights_fp32.data(),
                                   params_.momentum_fp32.data(), params_.weights_fp16.data(), n,
                                   &status->nonfinite);
  return out;
}

}  // namespace ddp
