// cpu_gelu_tanh.h: GPT-2's GELU (PyTorch's approximate='tanh') and its
// derivative, 8 lanes at a time, for the CPU backend's F16C loops.
//
// Why not elementwise_math.h's scalar tanhf per lane: glibc's tanhf (through
// expm1f) took 28% of a GPT training step on CPU (perf, 4 layers, 128 wide),
// more than the GEMMs' FP16 conversions. Here the same function is written
// through the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^-2u):
//   gelu(z)  = z * s,                        s = 1 / (1 + E), E = e^-2u
//   gelu'(z) = s + 2 z s^2 E du/dz           (s (1 - s) = s^2 E: no 1 - s
//                                             cancellation for s near 1)
// with u = sqrt(2/pi) (z + 0.044715 z^3) and an exp of our own (range
// reduction by ln 2, Taylor degree 7, 2^n from the exponent bits). It is a
// few FP32 ulps from the tanhf form, and closer to the exact function than
// it where 1 + tanh(u) cancels (z < -2); both are rounded to FP16 after.
// -2u is clamped to [-87, 80] so E stays finite and nonzero: at either end
// the terms that E decides are far below FP16's smallest value (E <= 2e-38
// against |z du| <= 3e13; s <= 2e-35), so no FP16 result changes.
// NaN z gives NaN (it passes through z); z = +Inf gives +Inf, as tanhf's.
// AVX without FMA, like every loop of cpu_elementwise.cpp.
#pragma once

#include "kernels/cpu/cpu_simd.h"

#if DDP_X86
namespace ddp::cpu {

// e^x for x in [-87, 88]: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor
// series to degree 7 (truncation 5e-9 relative, under an FP32 ulp).
DDP_AVX_F16C inline __m256 exp8_reduced(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 in two parts: n * kLn2Hi is exact for |n| < 2^10.
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
  // 2^n as the float with biased exponent n + 127 (AVX has no 256-bit
  // integer shift: two 128-bit halves).
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m128i bias = _mm_set1_epi32(127);
  const __m128i lo = _mm_slli_epi32(_mm_add_epi32(_mm256_castsi256_si128(ni), bias), 23);
  const __m128i hi = _mm_slli_epi32(_mm_add_epi32(_mm256_extractf128_si256(ni, 1), bias), 23);
  const __m256 two_n = _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1));
  return _mm256_mul_ps(p, two_n);
}

// E = e^-2u, clamped as the header says. max/min return their second
// operand for a NaN first one, so a NaN z gives a finite E here.
DDP_AVX_F16C inline __m256 gelu_tanh_exp_term8(__m256 z) {
  const __m256 z3 = _mm256_mul_ps(_mm256_mul_ps(z, z), z);
  const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f),
                                 _mm256_add_ps(z, _mm256_mul_ps(_mm256_set1_ps(0.044715f), z3)));
  __m256 x = _mm256_mul_ps(_mm256_set1_ps(-2.0f), u);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(80.0f));
  return exp8_reduced(x);
}

DDP_AVX_F16C inline __m256 gelu_tanh_forward8(__m256 z) {
  const __m256 e = gelu_tanh_exp_term8(z);
  return _mm256_div_ps(z, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// dy * gelu'(z).
DDP_AVX_F16C inline __m256 gelu_tanh_backward8(__m256 z, __m256 dy) {
  const __m256 e = gelu_tanh_exp_term8(z);
  const __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 du = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f),
                                  _mm256_add_ps(_mm256_set1_ps(1.0f),
                                                _mm256_mul_ps(_mm256_set1_ps(3.0f * 0.044715f), _mm256_mul_ps(z, z))));
  const __m256 ss_e = _mm256_mul_ps(_mm256_mul_ps(s, s), e);
  const __m256 d = _mm256_add_ps(s, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), z), _mm256_mul_ps(ss_e, du)));
  return _mm256_mul_ps(dy, d);
}

}  // namespace ddp::cpu
#endif  // DDP_X86
