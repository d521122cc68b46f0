// sum16.cpp
#include "comm/sum16.h"

#include "kernels/cpu/cpu_lowp_simd.h"  // load8, store8: the kernels' 8-lane conversions
#include "kernels/half_convert.h"       // f16c_available

namespace ddp {
namespace {

bool g_vector_enabled = true;

#if DDP_X86
// Widen both inputs, add in FP32, round back (RNE), 16 lanes a step. FP16's
// F16C form measured about 3x a convert-to-stack-blocks loop (comm results,
// 2026-11-30).
template <class C>
DDP_AVX_F16C size_t sum_into_avx(const lowp16* a, lowp16* b, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 s0 = _mm256_add_ps(cpu::load8(C{}, b + i), cpu::load8(C{}, a + i));
    const __m256 s1 = _mm256_add_ps(cpu::load8(C{}, b + i + 8), cpu::load8(C{}, a + i + 8));
    cpu::store8(C{}, b + i, s0);
    cpu::store8(C{}, b + i + 8, s1);
  }
  return i;
}
#endif

template <class C>
void sum_into(const lowp16* a, lowp16* b, size_t count) {
  size_t i = 0;
#if DDP_X86
  if (g_vector_enabled && f16c_available()) i = sum_into_avx<C>(a, b, count);
#endif
  for (; i < count; ++i) b[i] = C::narrow(C::widen(b[i]) + C::widen(a[i]));
}

}  // namespace

bool sum16_vector_paths_available() { return g_vector_enabled && f16c_available(); }
void set_sum16_vector_paths_enabled(bool enabled) { g_vector_enabled = enabled; }

void sum_into_fp16(const lowp16* a, lowp16* b, size_t count) { sum_into<Fp16Codec>(a, b, count); }

void sum_into_bf16(const lowp16* a, lowp16* b, size_t count) { sum_into<Bf16Codec>(a, b, count); }

}  // namespace ddp
