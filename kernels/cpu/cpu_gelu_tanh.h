// cpu_gelu_tanh.h: GPT-2's GELU (PyTorch's approximate='tanh') and its
// derivative for the CPU backend, as 8 AVX lanes and as scalar functions
// that do the same FP32 operations in the same order (cpu_exp8.h says why).
//
// Why not elementwise_math.h's scalar tanhf per lane: glibc's tanhf (through
// expm1f) took 28% of a GPT training step on CPU (perf, 4 layers, 128 wide),
// more than the GEMMs' FP16 conversions. Here the same function is written
// through the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^-2u):
//   gelu(z)  = z * s,                        s = 1 / (1 + E), E = e^-2u
//   gelu'(z) = s + 2 z s^2 E du/dz           (s (1 - s) = s^2 E: no 1 - s
//                                             cancellation for s near 1)
// with u = sqrt(2/pi) (z + 0.044715 z^3) and cpu_exp8.h's exp. It is a
// few FP32 ulps from the tanhf form, and closer to the exact function than
// it where 1 + tanh(u) cancels (z < -2); both are rounded to FP16 after.
// -2u is clamped to [-87, 80] so E stays finite and nonzero: at either end
// the terms that E decides are far below FP16's smallest value (E <= 2e-38
// against |z du| <= 3e13; s <= 2e-35), so no FP16 result changes.
// NaN z gives NaN (it passes through z); z = +Inf gives +Inf, as tanhf's.
#pragma once

#include "kernels/cpu/cpu_exp8.h"
#include "kernels/cpu/cpu_simd.h"

namespace ddp::cpu {

constexpr float kGeluSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

// E = e^-2u, clamped as the header says. A NaN z gives a finite E here
// (the clamp's max takes -87), and NaN through z below.
inline float gelu_tanh_exp_term(float z) {
  const float u = kGeluSqrt2OverPi * (z + kGeluCubic * ((z * z) * z));
  return exp_reduced(min_ps_lane(max_ps_lane(-2.0f * u, -87.0f), 80.0f));
}
inline float gelu_tanh_forward_cpu(float z) { return z / (1.0f + gelu_tanh_exp_term(z)); }
// dy * gelu'(z).
inline float gelu_tanh_backward_cpu(float z, float dy) {
  const float e = gelu_tanh_exp_term(z);
  const float s = 1.0f / (1.0f + e);
  const float du = kGeluSqrt2OverPi * (1.0f + (3.0f * kGeluCubic) * (z * z));
  return dy * (s + (2.0f * z) * (((s * s) * e) * du));
}

#if DDP_X86
DDP_AVX_F16C inline __m256 gelu_tanh_exp_term8(__m256 z) {
  const __m256 z3 = _mm256_mul_ps(_mm256_mul_ps(z, z), z);
  const __m256 u =
      _mm256_mul_ps(_mm256_set1_ps(kGeluSqrt2OverPi), _mm256_add_ps(z, _mm256_mul_ps(_mm256_set1_ps(kGeluCubic), z3)));
  __m256 x = _mm256_mul_ps(_mm256_set1_ps(-2.0f), u);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(80.0f));
  return exp8_reduced(x);
}

DDP_AVX_F16C inline __m256 gelu_tanh_forward8(__m256 z) {
  const __m256 e = gelu_tanh_exp_term8(z);
  return _mm256_div_ps(z, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

DDP_AVX_F16C inline __m256 gelu_tanh_backward8(__m256 z, __m256 dy) {
  const __m256 e = gelu_tanh_exp_term8(z);
  const __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 du = _mm256_mul_ps(
      _mm256_set1_ps(kGeluSqrt2OverPi),
      _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(3.0f * kGeluCubic), _mm256_mul_ps(z, z))));
  const __m256 ss_e = _mm256_mul_ps(_mm256_mul_ps(s, s), e);
  const __m256 d = _mm256_add_ps(s, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), z), _mm256_mul_ps(ss_e, du)));
  return _mm256_mul_ps(dy, d);
}
#endif  // DDP_X86

}  // namespace ddp::cpu
