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
// E is 0 where -2u < -87 (e^-2u < 2e-38) and +Inf where -2u > 80, and
// exp8 sees -2u clamped to [-87, 80]; where E is 0 or s is 0 the term
// 2 z s^2 E du is 0 (not 0 x Inf: BF16's |z| past 1.8e19 overflows z^2).
// At both ends the exact terms are far below either format's resolution
// of the result: every finite FP16 z gets the bits a clamped finite E gave
// (compared at all of them when BF16 came), and BF16's large |z| get
// gelu(z) = z or -0 and gelu' = 1 or 0, as the function has (the tests hold
// every FP16 and every BF16 value to the double function). NaN z gives NaN
// (it passes through z); z = +Inf gives +Inf, as tanhf's, and gelu'(+Inf)
// = 1; z = -Inf gives NaN, as PyTorch's tanh form.
#pragma once

#include "kernels/cpu/cpu_exp8.h"
#include "kernels/cpu/cpu_simd.h"

namespace ddp::cpu {

constexpr float kGeluSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

// E = e^-2u, 0 or +Inf past the ends, as the header says. A NaN z gives a finite E here
// (the clamp's max takes -87), and NaN through z below.
inline float gelu_tanh_exp_term(float z) {
  const float u = kGeluSqrt2OverPi * (z + kGeluCubic * ((z * z) * z));
  const float x = -2.0f * u;
  if (x < -87.0f) return 0.0f;
  if (x > 80.0f) return __builtin_inff();
  return exp_reduced(min_ps_lane(max_ps_lane(x, -87.0f), 80.0f));
}
inline float gelu_tanh_forward_cpu(float z) { return z / (1.0f + gelu_tanh_exp_term(z)); }
// dy * gelu'(z).
inline float gelu_tanh_backward_cpu(float z, float dy) {
  const float e = gelu_tanh_exp_term(z);
  const float s = 1.0f / (1.0f + e);
  const float du = kGeluSqrt2OverPi * (1.0f + (3.0f * kGeluCubic) * (z * z));
  const bool term_vanishes = s == 0.0f || e == 0.0f;
  return dy * (s + (term_vanishes ? 0.0f : (2.0f * z) * (((s * s) * e) * du)));
}

#if DDP_X86
DDP_AVX_F16C inline __m256 gelu_tanh_exp_term8(__m256 z) {
  const __m256 z3 = _mm256_mul_ps(_mm256_mul_ps(z, z), z);
  const __m256 u =
      _mm256_mul_ps(_mm256_set1_ps(kGeluSqrt2OverPi), _mm256_add_ps(z, _mm256_mul_ps(_mm256_set1_ps(kGeluCubic), z3)));
  const __m256 x = _mm256_mul_ps(_mm256_set1_ps(-2.0f), u);
  // Both compares are false for NaN, as the scalar's.
  const __m256 below = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  const __m256 above = _mm256_cmp_ps(x, _mm256_set1_ps(80.0f), _CMP_GT_OQ);
  const __m256 e = exp8_reduced(_mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(80.0f)));
  return _mm256_blendv_ps(_mm256_andnot_ps(below, e), _mm256_set1_ps(__builtin_inff()), above);
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
  const __m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), z), _mm256_mul_ps(ss_e, du));
  const __m256 zero = _mm256_setzero_ps();
  const __m256 kept = _mm256_and_ps(_mm256_cmp_ps(s, zero, _CMP_NEQ_UQ), _mm256_cmp_ps(e, zero, _CMP_NEQ_UQ));
  const __m256 d = _mm256_add_ps(s, _mm256_and_ps(term, kept));
  return _mm256_mul_ps(dy, d);
}
#endif  // DDP_X86

}  // namespace ddp::cpu
