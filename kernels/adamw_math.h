// adamw_math.h: one element of the AdamW step, written once and called from
// the CPU loop (cpu/cpu_adamw.cpp) and the CUDA kernel (ops/adamw_cuda.cu),
// as sgd_update_element is for SGD (elementwise_math.h).
//
// torch.optim.AdamW (torch/optim/adam.py, _single_tensor_adam with
// decoupled weight decay), for the t-th step actually taken (t >= 1):
//   p  *= 1 - lr * weight_decay                     (tensors whose decay flag is set)
//   m   = beta1 * m + (1 - beta1) * g               (torch: exp_avg.lerp_(g, 1 - beta1))
//   v   = beta2 * v + (1 - beta2) * g * g           (exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2))
//   step_size = lr / (1 - beta1^t)
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p  -= step_size * (m / denom)                   (param.addcdiv_(m, denom, -step_size))
// with g the unscaled gradient times the clip coefficient. As in torch, the
// per-step scalars (bias corrections, step size, decay factor) are computed
// in double, as Python floats are, and rounded once to float; the element
// math is FP32 with no FMA contraction on the CPU (cpu_elementwise.h).
// torch's lerp rounds m differently in the last bit; the tests hold both to
// a double transcription.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace ddp {

struct AdamWParams {
  float lr = 1e-3f;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;     // decoupled; applied only where the decay mask is set
  float grad_multiplier = 1.0f;  // clip coefficient (1 when not clipping)
  int64_t step = 1;              // t of this step (1-based), unless steps_taken is set
  // Where set, read by the kernel when it runs (the device-resident step
  // state, step_status.h): lr, and t = *steps_taken + 1 (steps_taken counts
  // the steps taken before this one; step_status_finish advances it only
  // when the step was not skipped).
  const float* lr_ptr = nullptr;
  const int64_t* steps_taken = nullptr;
};

// The per-step scalars of one AdamW step, once per thread.
struct AdamWScalars {
  float decay_factor;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float grad_multiplier;
};

DDP_HD AdamWScalars adamw_scalars(const AdamWParams& a) {
  const double lr = a.lr_ptr ? *a.lr_ptr : a.lr;
  const double t = static_cast<double>(a.steps_taken ? *a.steps_taken + 1 : a.step);
  AdamWScalars s;
  s.decay_factor = static_cast<float>(1.0 - lr * a.weight_decay);
  s.beta1 = static_cast<float>(a.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - a.beta1);
  s.beta2 = static_cast<float>(a.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - a.beta2);
  s.step_size = static_cast<float>(lr / (1.0 - pow(a.beta1, t)));
  s.bias_correction2_sqrt = static_cast<float>(sqrt(1.0 - pow(a.beta2, t)));
  s.eps = static_cast<float>(a.eps);
  s.grad_multiplier = a.grad_multiplier;
  return s;
}

// One element: master weight p, first moment m, second moment v; `decay`
// is the element's tensor flag (the registry's weight_decay).
DDP_HD void adamw_update_element(const AdamWScalars& s, float grad, bool decay, float& p, float& m, float& v) {
  const float g = grad * s.grad_multiplier;
  if (decay) p = p * s.decay_factor;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p = p - s.step_size * (m / denom);
}

}  // namespace ddp
