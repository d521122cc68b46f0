// cpu_softmax_rows.cpp: see cpu_softmax_rows.h.
#include "kernels/cpu/cpu_softmax_rows.h"

#include "kernels/cpu/cpu_exp8.h"
#include "kernels/cpu/cpu_simd.h"
#include "kernels/half_convert.h"

namespace ddp::cpu {
namespace {

// The fixed tree the partial sums are added in, both paths.
float sum_partials(const float* p) { return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])); }

#if DDP_X86
// max_ps/min_ps return their second operand when either is NaN: the input
// goes second, so a NaN stays NaN through the clamp (and exp8 of NaN is NaN).
DDP_AVX_F16C inline __m256 exp_clamped8(__m256 x) {
  return exp8_reduced(_mm256_min_ps(_mm256_set1_ps(0.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x)));
}

DDP_AVX_F16C float exp_shifted_sum_avx(const float* in, float shift, float* out, size_t n) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_clamped8(_mm256_sub_ps(_mm256_loadu_ps(in + j), s));
    _mm256_storeu_ps(out + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {
    // The tail as 8 lanes; the lanes past n are left out of the sum.
    alignas(32) float lanes[8] = {};
    for (size_t l = 0; j + l < n; ++l) lanes[l] = in[j + l];
    const __m256 e = exp_clamped8(_mm256_sub_ps(_mm256_load_ps(lanes), s));
    _mm256_store_ps(lanes, e);
    for (size_t l = 0; l < 8; ++l) {
      if (j + l < n)
        out[j + l] = lanes[l];
      else
        lanes[l] = 0.0f;
    }
    acc = _mm256_add_ps(acc, _mm256_load_ps(lanes));
  }
  alignas(32) float p[8];
  _mm256_store_ps(p, acc);
  return sum_partials(p);
}
#endif

}  // namespace

float exp_shifted_sum(const float* in, float shift, float* out, size_t n) {
#if DDP_X86
  if (f16c_available()) return exp_shifted_sum_avx(in, shift, out, n);
#endif
  // The same operations one lane at a time: the same bits as the AVX path.
  float p[8] = {};
  for (size_t j = 0; j < n; ++j) {
    const float e = exp_reduced(min_ps_lane(0.0f, max_ps_lane(-87.0f, in[j] - shift)));
    p[j % 8] += (out[j] = e);
  }
  return sum_partials(p);
}

}  // namespace ddp::cpu
