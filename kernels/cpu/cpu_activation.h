// cpu_activation.h: the CPU backend's activations, elementwise_math.h's
// except GELU-tanh, which goes through cpu_gelu_tanh.h (its lanes and its
// scalar twin give the same bits, so the 8-lane loops, their tails and the
// portable loops of cpu_elementwise.cpp agree).
#pragma once

#include "kernels/cpu/cpu_gelu_tanh.h"
#include "kernels/elementwise_math.h"

namespace ddp::cpu {

inline float cpu_activation_forward(Activation act, float z) {
  return act == Activation::GeluTanh ? gelu_tanh_forward_cpu(z) : activation_forward(act, z);
}
inline float cpu_activation_backward(Activation act, float z, float dy) {
  return act == Activation::GeluTanh ? gelu_tanh_backward_cpu(z, dy) : activation_backward(act, z, dy);
}
// gemm_epilogue_activation (gemm_epilogue.h) with the CPU's activations.
inline float cpu_epilogue_activation(Activation act, Activation dact, float z, float v) {
  if (dact != Activation::None) v = cpu_activation_backward(dact, z, v);
  return cpu_activation_forward(act, v);
}

}  // namespace ddp::cpu
