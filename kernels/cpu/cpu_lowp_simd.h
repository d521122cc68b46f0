// cpu_lowp_simd.h: 8 lanes of the 16-bit word (lowp16.h) to FP32 and back
// in each codec (lowp_codec.h), for the CPU backend's 8-lane loops:
// load8(codec, p) widens exactly, store8(codec, p, v) rounds to nearest
// even as the codec's scalar narrow does (a NaN stays a NaN: F16C keeps
// its payload's top, BF16 quiets it as float_to_bfloat16_bits_portable).
// Both under the loops' own target (cpu_simd.h: AVX and F16C, whose SSE4.1
// integer halves do BF16's carry), so they inline into either codec's loop.
#pragma once

#include "kernels/cpu/cpu_simd.h"
#include "kernels/lowp_codec.h"

namespace ddp::cpu {

#if DDP_X86
DDP_AVX_F16C inline __m256 load8(Fp16Codec, const lowp16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

DDP_AVX_F16C inline void store8(Fp16Codec, lowp16* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Each 16 bits shifted to the top of an FP32 lane.
DDP_AVX_F16C inline __m256 load8(Bf16Codec, const lowp16* p) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i lo = _mm_slli_epi32(_mm_cvtepu16_epi32(packed), 16);
  const __m128i hi = _mm_slli_epi32(_mm_cvtepu16_epi32(_mm_srli_si128(packed, 8)), 16);
  return _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// 4 lanes of float_to_bfloat16_bits_portable, in the low 16 bits of each.
DDP_AVX_F16C inline __m128i bfloat16_bits4(__m128 v) {
  const __m128i x = _mm_castps_si128(v);
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(1));
  const __m128i rounded = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7fff)), lsb), 16);
  const __m128i quiet = _mm_or_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(0x0040));
  const __m128i nan = _mm_castps_si128(_mm_cmpunord_ps(v, v));
  return _mm_blendv_epi8(rounded, quiet, nan);
}

DDP_AVX_F16C inline void store8(Bf16Codec, lowp16* p, __m256 v) {
  const __m128i lo = bfloat16_bits4(_mm256_castps256_ps128(v));
  const __m128i hi = bfloat16_bits4(_mm256_extractf128_ps(v, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(lo, hi));  // every lane below 2^16
}
#endif

}  // namespace ddp::cpu
