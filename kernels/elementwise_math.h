// elementwise_math.h: per-element math written once and called from the CPU
// loops (cpu_backend.cpp) and the CUDA kernels (cuda_*.cu) alike, so both
// backends compute the same function and differ only in FP32 rounding of
// transcendental calls (erff/expf/logf/tanhf), which the tests' tolerances
// cover. One exception: the CPU computes GELU-tanh in the equal form
// z * sigmoid(2u) with its own exp (kernels/cpu/cpu_gelu_tanh.h says why).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/lowp_codec.h"
#include "kernels/host_device.h"

namespace ddp {

// Gelu is PyTorch's exact (erf) form, the MLP's; GeluTanh is
// nn.GELU(approximate='tanh'), GPT-2's (and cuBLASLt's GELU epilogue's).
enum class Activation { None, Relu, Gelu, GeluTanh };

DDP_HD float relu_forward(float z) { return z > 0.0f ? z : 0.0f; }
// Derivative at 0 is taken as 0, as PyTorch does.
DDP_HD float relu_backward(float z, float dy) { return z > 0.0f ? dy : 0.0f; }

// PyTorch's exact GELU: 0.5 * z * (1 + erf(z / sqrt(2))).
DDP_HD float gelu_forward(float z) { return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f)); }
// d/dz = Phi(z) + z * phi(z).
DDP_HD float gelu_backward(float z, float dy) {
  const float cdf = 0.5f * (1.0f + erff(z * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * z * z);
  return dy * (cdf + z * pdf);
}

// PyTorch's tanh form: 0.5 * z * (1 + tanh(sqrt(2/pi) * (z + 0.044715 z^3))).
// tanhf saturates to +-1 for large |u|, so the result is z or -0 there, as
// PyTorch's; no Inf/Inf.
constexpr float kGeluTanhSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCubic = 0.044715f;
DDP_HD float gelu_tanh_forward(float z) {
  const float u = kGeluTanhSqrt2OverPi * (z + kGeluTanhCubic * z * z * z);
  return 0.5f * z * (1.0f + tanhf(u));
}
// d/dz = 0.5 (1 + t) + 0.5 z (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 z^2),
// t = tanh(u): the derivative of the tanh form itself (PyTorch's
// gelu_backward with approximate='tanh'), not of the erf form.
DDP_HD float gelu_tanh_backward(float z, float dy) {
  const float z2 = z * z;
  const float t = tanhf(kGeluTanhSqrt2OverPi * (z + kGeluTanhCubic * z2 * z));
  const float du = kGeluTanhSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * z2);
  return dy * (0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * du);
}

DDP_HD float activation_forward(Activation act, float z) {
  switch (act) {
    case Activation::Relu:
      return relu_forward(z);
    case Activation::Gelu:
      return gelu_forward(z);
    case Activation::GeluTanh:
      return gelu_tanh_forward(z);
    default:
      return z;
  }
}

DDP_HD float activation_backward(Activation act, float z, float dy) {
  switch (act) {
    case Activation::Relu:
      return relu_backward(z, dy);
    case Activation::Gelu:
      return gelu_backward(z, dy);
    case Activation::GeluTanh:
      return gelu_tanh_backward(z, dy);
    default:
      return dy;
  }
}

// Hyper-parameters of one SGD step, PyTorch torch.optim.SGD semantics:
//   g  = grad * grad_multiplier (unscaled gradient times the clip coefficient)
//   g += weight_decay * p
//   buf = first_step ? g : momentum * buf + (1 - dampening) * g
//   g  = nesterov ? g + momentum * buf : buf        (when momentum != 0)
//   p -= lr * g
struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = true;        // momentum buffer not yet initialised
  float grad_multiplier = 1.0f;  // clip coefficient (1 when not clipping)
  // Where set, read by the kernel when it runs instead of the values above
  // (the device-resident step state, step_status.h): lr, and first_step =
  // (*momentum_initialized == 0).
  const float* lr_ptr = nullptr;
  const int32_t* momentum_initialized = nullptr;
};

// The parameters with the pointed-to values read; once per thread.
DDP_HD SgdParams resolved(SgdParams s) {
  if (s.lr_ptr) s.lr = *s.lr_ptr;
  if (s.momentum_initialized) s.first_step = *s.momentum_initialized == 0;
  return s;
}

// One element of the SGD update on FP32 master weight `p` and momentum `buf`.
// The unscaled FP32 gradient of one 16-bit element in codec C's precision
// (lowp_codec.h): one rounding, shared by the unscale pass and the fused
// update so both give the same bits.
template <class C>
DDP_HD float unscale_element(lowp16 g, float inv_scale) {
  return C::widen(g) * inv_scale;
}

DDP_HD void sgd_update_element(const SgdParams& s, float grad, float& p, float& buf) {
  float g = grad * s.grad_multiplier;
  if (s.weight_decay != 0.0f) g += s.weight_decay * p;
  if (s.momentum != 0.0f) {
    buf = s.first_step ? g : s.momentum * buf + (1.0f - s.dampening) * g;
    g = s.nesterov ? g + s.momentum * buf : buf;
  }
  p -= s.lr * g;
}

}  // namespace ddp
