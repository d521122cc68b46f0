// sum16.cpp
#include "comm/sum16.h"

#include "kernels/half_convert.h"  // f16c_available
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ddp {
namespace {

bool g_vector_enabled = true;

bool avx2_available() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

#if defined(__x86_64__)
// Widen both inputs with F16C, add in FP32, round back (RNE). Measured
// about 3x a convert-to-stack-blocks loop (comm results, 2026-11-30).
__attribute__((target("f16c,avx"))) size_t sum_into_fp16_f16c(const lowp16* a, lowp16* b, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 a1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i + 8)));
    const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8)));
    constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + i), _mm256_cvtps_ph(_mm256_add_ps(b0, a0), kRne));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + i + 8), _mm256_cvtps_ph(_mm256_add_ps(b1, a1), kRne));
  }
  return i;
}

// 8 bfloat16s to FP32: each 16 bits shifted to the top of a lane.
__attribute__((target("avx2"))) inline __m256 load8_bf16(const lowp16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// 8 FP32s to bfloat16 by float_to_bfloat16_bits_portable's rule: NaNs
// quieted, the rest rounded by adding 0x7fff plus the kept half's lowest bit.
__attribute__((target("avx2"))) inline void store8_bf16(lowp16* p, __m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);  // every lane below 2^16
  // Pack the 8 lanes to 16 bits: packus works within 128-bit halves, so the
  // halves' results (64 bits each) are brought together after it.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

__attribute__((target("avx2"))) size_t sum_into_bf16_avx2(const lowp16* a, lowp16* b, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 s0 = _mm256_add_ps(load8_bf16(b + i), load8_bf16(a + i));
    const __m256 s1 = _mm256_add_ps(load8_bf16(b + i + 8), load8_bf16(a + i + 8));
    store8_bf16(b + i, s0);
    store8_bf16(b + i + 8, s1);
  }
  return i;
}
#endif

}  // namespace

bool sum16_vector_paths_available() { return g_vector_enabled && f16c_available() && avx2_available(); }
void set_sum16_vector_paths_enabled(bool enabled) { g_vector_enabled = enabled; }

void sum_into_fp16(const lowp16* a, lowp16* b, size_t count) {
  size_t i = 0;
#if defined(__x86_64__)
  if (g_vector_enabled && f16c_available()) i = sum_into_fp16_f16c(a, b, count);
#endif
  for (; i < count; ++i) b[i] = to_half(half_to_float(b[i]) + half_to_float(a[i]));
}

void sum_into_bf16(const lowp16* a, lowp16* b, size_t count) {
  size_t i = 0;
#if defined(__x86_64__)
  if (g_vector_enabled && avx2_available()) i = sum_into_bf16_avx2(a, b, count);
#endif
  for (; i < count; ++i) b[i] = to_bfloat16(bfloat16_to_float(b[i]) + bfloat16_to_float(a[i]));
}

}  // namespace ddp
