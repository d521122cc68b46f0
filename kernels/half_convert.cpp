// half_convert.cpp: F16C fast path behind run-time detection, portable fallback.
#include "kernels/half_convert.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DDP_HAVE_X86 1
#endif

namespace ddp {
namespace {

bool detect_f16c() {
#if DDP_HAVE_X86
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
  return false;
#endif
}

bool g_f16c_enabled = detect_f16c();

#if DDP_HAVE_X86
__attribute__((target("f16c,avx"))) void half_to_float_f16c(const lowp16* src, float* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) dst[i] = half_bits_to_float_portable(src[i].bits);
}

__attribute__((target("f16c,avx"))) void float_to_half_f16c(const float* src, lowp16* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 f = _mm256_loadu_ps(src + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < count; ++i) dst[i].bits = float_to_half_bits_portable(src[i]);
}
#endif

}  // namespace

bool f16c_available() { return g_f16c_enabled; }

void set_f16c_enabled(bool enabled) { g_f16c_enabled = enabled && detect_f16c(); }

void half_to_float_array(const lowp16* src, float* dst, size_t count) {
#if DDP_HAVE_X86
  if (g_f16c_enabled) return half_to_float_f16c(src, dst, count);
#endif
  for (size_t i = 0; i < count; ++i) dst[i] = half_bits_to_float_portable(src[i].bits);
}

void float_to_half_array(const float* src, lowp16* dst, size_t count) {
#if DDP_HAVE_X86
  if (g_f16c_enabled) return float_to_half_f16c(src, dst, count);
#endif
  for (size_t i = 0; i < count; ++i) dst[i].bits = float_to_half_bits_portable(src[i]);
}

}  // namespace ddp
