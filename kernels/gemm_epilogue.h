// gemm_epilogue.h: the epilogue of GemmLowp (backend.h), what happens to an
// FP32 GEMM result before its one rounding to the working precision (codec
// C, lowp_codec.h), written once for the
// CPU narrowing pass (cpu_elementwise.cpp), the CUDA fallback GEMM and the
// CUDA epilogue kernel (cuda_gemm_simple.cu, cuda_gemm_epilogue.cu), so all
// compute the same function. Also the rules on which epilogue combinations
// are valid, checked by both backends.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/gemm_lowp.h"
#include "kernels/elementwise_math.h"
#include "kernels/lowp_codec.h"
#include "kernels/host_device.h"

namespace ddp {

// The activation part of the epilogue on v (bias already added): act'(z) * v
// for the backward GEMM, act(v) for the forward one (at most one of the two
// is not None).
DDP_HD float gemm_epilogue_activation(Activation act, Activation dact, float z, float v) {
  if (dact != Activation::None) v = activation_backward(dact, z, v);
  return activation_forward(act, v);
}

// The whole epilogue of element (i, j): v is alpha * acc (+ beta * C) in
// FP32. Writes pre_activation[i, j] when asked and returns C[i, j].
template <class C>
DDP_HD lowp16 gemm_epilogue_element(const GemmLowp& g, int i, int j, float v) {
  if (g.bias) v += C::widen(g.bias[j]);
  if (g.pre_activation) g.pre_activation[static_cast<size_t>(i) * g.ld_pre_activation + j] = C::narrow(v);
  const float z =
      g.dact != Activation::None ? C::widen(g.dact_input[static_cast<size_t>(i) * g.ld_dact_input + j]) : 0.0f;
  return C::narrow(gemm_epilogue_activation(g.act, g.dact, z, v));
}

// True when g asks for any epilogue work beyond alpha/beta (bias aside).
inline bool has_activation_epilogue(const GemmLowp& g) {
  return g.act != Activation::None || g.dact != Activation::None || g.pre_activation != nullptr;
}

// Throws ddp::Error when the epilogue fields of g are inconsistent (both act
// and dact, a missing dact input, a stride shorter than a row, beta != 0
// with an element-wise epilogue). A bias with beta != 0 is valid: the
// residual add fused into a projection (backend.h). `describe` names the GEMM in the message.
void validate_gemm_epilogue(const GemmLowp& g, const std::string& describe);

}  // namespace ddp
