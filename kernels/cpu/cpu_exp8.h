// cpu_exp8.h: e^x for the CPU backend's softmax rows and GELU-tanh, as 8
// AVX lanes and as a scalar function that does the same FP32 operations in
// the same order (no FMA in either: the scalar code is compiled for the
// baseline x86-64 target, the lanes for AVX and F16C only), so the portable
// loops and the F16C loops give the same bits, as everywhere in the CPU
// backend (cpu_elementwise.h).
//
// x = n ln2 + r, |r| <= ln2 / 2, with ln 2 in two parts (n * 0.693359375 is
// exact for |n| < 2^10); e^r by its Taylor series to degree 7 (truncation
// 5e-9 relative, under an FP32 ulp), Horner's rule; 2^n from the exponent
// bits. Valid for x in [-87, 88] (2^n normal); callers clamp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_simd.h"

namespace ddp::cpu {

constexpr float kExpLog2e = 1.44269504088896341f;
constexpr float kExpLn2Hi = 0.693359375f;
constexpr float kExpLn2Lo = -2.12194440e-4f;
constexpr float kExpTaylor[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                 1.0f / 6.0f,    0.5f,          1.0f,          1.0f};

// std::max/std::min as the AVX max_ps/min_ps lanes compute them: a NaN in
// either operand gives the second operand.
inline float max_ps_lane(float a, float b) { return a > b ? a : b; }
inline float min_ps_lane(float a, float b) { return a < b ? a : b; }

inline float exp_reduced(float x) {
  const float n = std::nearbyint(x * kExpLog2e);  // round to nearest even, as _MM_FROUND_TO_NEAREST_INT
  const float r = (x - n * kExpLn2Hi) - n * kExpLn2Lo;
  float p = kExpTaylor[0];
  for (int k = 1; k < 8; ++k) p = p * r + kExpTaylor[k];
  // n is NaN only for a NaN x, whose p is NaN already (the bits of 2^n then do not matter).
  const int32_t ni = std::isnan(n) ? 0 : static_cast<int32_t>(n);
  const uint32_t bits = static_cast<uint32_t>(ni + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

#if DDP_X86
// exp_reduced, 8 lanes.
DDP_AVX_F16C inline __m256 exp8_reduced(__m256 x) {
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kExpLn2Hi))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(kExpLn2Lo)));
  __m256 p = _mm256_set1_ps(kExpTaylor[0]);
  for (int k = 1; k < 8; ++k) p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpTaylor[k]));
  // 2^n as the float with biased exponent n + 127 (AVX has no 256-bit
  // integer shift: two 128-bit halves).
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m128i bias = _mm_set1_epi32(127);
  const __m128i lo = _mm_slli_epi32(_mm_add_epi32(_mm256_castsi256_si128(ni), bias), 23);
  const __m128i hi = _mm_slli_epi32(_mm_add_epi32(_mm256_extractf128_si256(ni, 1), bias), 23);
  const __m256 two_n = _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1));
  return _mm256_mul_ps(p, two_n);
}
#endif  // DDP_X86

}  // namespace ddp::cpu
