// cpu_adamw.cpp: the AdamW range loop. The 8-lane path uses only IEEE
// operations that round exactly once (mul, add, sub, div, sqrt) and names
// avx and f16c as its targets (no FMA, so nothing is contracted): lane for
// lane the bits of the scalar adamw_update_element.
#include "kernels/cpu/cpu_adamw.h"

#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32
#include "kernels/half_convert.h"

#include "kernels/cpu/cpu_lowp_simd.h"

namespace ddp::cpu {
namespace {

template <class C>
float gradient_at(const AdamWBuffers& b, float inv_scale, size_t i) {
  return b.grads_fp32 ? b.grads_fp32[i] : unscale_element<C>(b.grads_lowp[i], inv_scale);
}

template <class C>
void adamw_scalar(const AdamWScalars& s, const AdamWBuffers& b, float inv_scale, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const bool decay = b.decay_mask ? b.decay_mask[i] != 0 : true;
    adamw_update_element(s, gradient_at<C>(b, inv_scale, i), decay, b.master_fp32[i], b.exp_avg_fp32[i],
                         b.exp_avg_sq_fp32[i]);
  }
  narrow_fp32(C::kPrecision, b.master_fp32 + begin, b.weights_lowp + begin, end - begin);
}

#if DDP_X86
// All-ones lanes where the 8 mask bytes at `mask` are non-zero.
DDP_AVX_F16C inline __m256 decay_lanes(const uint8_t* mask) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mask));
  const __m128i lo = _mm_cvtepu8_epi32(bytes), hi = _mm_cvtepu8_epi32(_mm_srli_si128(bytes, 4));
  const __m256 as_float = _mm256_cvtepi32_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(lo), hi, 1));
  return _mm256_cmp_ps(as_float, _mm256_setzero_ps(), _CMP_NEQ_OQ);
}

template <class C>
DDP_AVX_F16C void adamw_avx(const AdamWScalars& s, const AdamWBuffers& b, float inv_scale, size_t begin, size_t end) {
  const __m256 mult = _mm256_set1_ps(s.grad_multiplier), decay = _mm256_set1_ps(s.decay_factor),
               b1 = _mm256_set1_ps(s.beta1), omb1 = _mm256_set1_ps(s.one_minus_beta1), b2 = _mm256_set1_ps(s.beta2),
               omb2 = _mm256_set1_ps(s.one_minus_beta2), bc2 = _mm256_set1_ps(s.bias_correction2_sqrt),
               eps = _mm256_set1_ps(s.eps), step = _mm256_set1_ps(s.step_size), scale = _mm256_set1_ps(inv_scale);
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 raw =
        b.grads_fp32 ? _mm256_loadu_ps(b.grads_fp32 + i) : _mm256_mul_ps(load8(C{}, b.grads_lowp + i), scale);
    const __m256 g = _mm256_mul_ps(raw, mult);
    __m256 p = _mm256_loadu_ps(b.master_fp32 + i);
    p = _mm256_blendv_ps(p, _mm256_mul_ps(p, decay), b.decay_mask ? decay_lanes(b.decay_mask + i) : all);
    const __m256 m = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(b.exp_avg_fp32 + i)), _mm256_mul_ps(omb1, g));
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(b.exp_avg_sq_fp32 + i)),
                                   _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bc2), eps);
    p = _mm256_sub_ps(p, _mm256_mul_ps(step, _mm256_div_ps(m, denom)));
    _mm256_storeu_ps(b.exp_avg_fp32 + i, m);
    _mm256_storeu_ps(b.exp_avg_sq_fp32 + i, v);
    _mm256_storeu_ps(b.master_fp32 + i, p);
    store8(C{}, b.weights_lowp + i, p);
  }
  if (i < end) adamw_scalar<C>(s, b, inv_scale, i, end);
}
#endif  // DDP_X86

}  // namespace

void adamw_range(Precision p, const AdamWScalars& s, const AdamWBuffers& b, float inv_scale, size_t begin, size_t end) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return adamw_avx<C>(s, b, inv_scale, begin, end);
#endif
    adamw_scalar<C>(s, b, inv_scale, begin, end);
  });
}

}  // namespace ddp::cpu
