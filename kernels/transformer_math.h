// transformer_math.h: the per-element math of the GPT's operations
// (backend.h, "transformer operations"), written once for the CPU loops
// (cpu_transformer.cpp) and the CUDA kernels (cuda_transformer.cu,
// cuda_attention.cu), so both backends apply the same FP32 function to each
// element. What differs between them is only the order of the FP32 row and
// column sums (sequential on the CPU, trees on CUDA), covered by the
// tests' tolerances.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/host_device.h"

namespace ddp {

// GPT-2's LayerNorm epsilon (nn.LayerNorm's default, nanoGPT's).
constexpr float kLayerNormEps = 1e-5f;

// rstd from the biased variance (mean of squared deviations), as
// nn.LayerNorm: 1 / sqrt(var + eps).
DDP_HD float layernorm_rstd(float variance, float eps) { return 1.0f / sqrtf(variance + eps); }

// xhat = (x - mean) * rstd, the normalised input, shared by forward and
// backward so both see the same FP32 value.
DDP_HD float layernorm_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }

// y = xhat * gamma + beta (one rounding to FP16 by the caller).
DDP_HD float layernorm_output(float xhat, float gamma, float beta) { return xhat * gamma + beta; }

// dx = rstd * (g - mean_g - xhat * mean_gx), g = dy * gamma, with
// mean_g = mean_c(g) and mean_gx = mean_c(g * xhat) over the row: the
// gradient of LayerNorm with respect to its input.
DDP_HD float layernorm_dx(float g, float xhat, float mean_g, float mean_gx, float rstd) {
  return rstd * ((g - mean_g) - xhat * mean_gx);
}

// Causal softmax over row i of a [T, T] score matrix: entries j > i are
// masked (probability exactly 0). The scale 1/sqrt(head size) multiplies
// the score before the mask and the max, as nanoGPT's
// (q @ k^T) * (1/sqrt(hs)) then masked_fill.
DDP_HD bool causal_visible(int i, int j) { return j <= i; }

// ds = scale * p * (dp - dot), dot = sum_j p_j dp_j over the visible j:
// the softmax gradient, times the scale that multiplied the scores.
DDP_HD float causal_softmax_grad(float p, float dp, float dot, float scale) { return scale * (p * (dp - dot)); }

}  // namespace ddp
