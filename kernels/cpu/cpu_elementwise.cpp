// cpu_elementwise.cpp: 8-lane AVX loops (the 16-bit loads and stores of
// cpu_lowp_simd.h: F16C for FP16, SSE4.1 integer halves for BF16) with the
// portable scalar loops of half.h and bfloat16.h as fallback and for the
// tails, each a template over the codec (lowp_codec.h). No FMA: the target
// attributes below name avx and f16c only, so the compiler cannot contract
// a*b+c and every lane rounds exactly as the scalar definition does.
#include "kernels/cpu/cpu_elementwise.h"

#include <algorithm>

#include "kernels/gemm_epilogue.h"
#include "kernels/half_convert.h"

#include "kernels/cpu/cpu_activation.h"
#include "kernels/cpu/cpu_gelu_tanh.h"
#include "kernels/cpu/cpu_lowp_simd.h"

namespace ddp::cpu {
namespace {

#if DDP_X86
template <class C>
DDP_AVX_F16C void activation_forward_avx(Activation act, const lowp16* z, lowp16* y, size_t count) {
  size_t i = 0;
  if (act == Activation::Relu) {
    const __m256 zero = _mm256_setzero_ps();
    // z > 0 ? z : +0 (NaN and -0 give +0), as relu_forward.
    for (; i + 8 <= count; i += 8) {
      const __m256 v = load8(C{}, z + i);
      store8(C{}, y + i, _mm256_and_ps(v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ)));
    }
  } else if (act == Activation::None) {
    for (; i + 8 <= count; i += 8) store8(C{}, y + i, load8(C{}, z + i));
  } else if (act == Activation::GeluTanh) {
    for (; i + 8 <= count; i += 8) store8(C{}, y + i, gelu_tanh_forward8(load8(C{}, z + i)));
  } else {
    alignas(32) float tmp[8];
    for (; i + 8 <= count; i += 8) {
      _mm256_store_ps(tmp, load8(C{}, z + i));
      for (float& v : tmp) v = cpu_activation_forward(act, v);
      store8(C{}, y + i, _mm256_load_ps(tmp));
    }
  }
  for (; i < count; ++i) y[i] = C::narrow(cpu_activation_forward(act, C::widen(z[i])));
}

template <class C>
DDP_AVX_F16C void activation_backward_avx(Activation act, const lowp16* z, const lowp16* dy, lowp16* dz, size_t count) {
  size_t i = 0;
  if (act == Activation::Relu) {
    const __m256 zero = _mm256_setzero_ps();
    // z > 0 ? dy : +0, as relu_backward.
    for (; i + 8 <= count; i += 8) {
      const __m256 mask = _mm256_cmp_ps(load8(C{}, z + i), zero, _CMP_GT_OQ);
      store8(C{}, dz + i, _mm256_and_ps(load8(C{}, dy + i), mask));
    }
  } else if (act == Activation::None) {
    for (; i + 8 <= count; i += 8) store8(C{}, dz + i, load8(C{}, dy + i));
  } else if (act == Activation::GeluTanh) {
    for (; i + 8 <= count; i += 8) store8(C{}, dz + i, gelu_tanh_backward8(load8(C{}, z + i), load8(C{}, dy + i)));
  } else {
    alignas(32) float zt[8], dyt[8];
    for (; i + 8 <= count; i += 8) {
      _mm256_store_ps(zt, load8(C{}, z + i));
      _mm256_store_ps(dyt, load8(C{}, dy + i));
      for (int l = 0; l < 8; ++l) dyt[l] = cpu_activation_backward(act, zt[l], dyt[l]);
      store8(C{}, dz + i, _mm256_load_ps(dyt));
    }
  }
  for (; i < count; ++i) dz[i] = C::narrow(cpu_activation_backward(act, C::widen(z[i]), C::widen(dy[i])));
}

template <class C>
DDP_AVX_F16C void add_bias_rows_avx(lowp16* y, const lowp16* bias, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    lowp16* row = y + r * cols;
    size_t c = 0;
    for (; c + 8 <= cols; c += 8) store8(C{}, row + c, _mm256_add_ps(load8(C{}, row + c), load8(C{}, bias + c)));
    for (; c < cols; ++c) row[c] = C::narrow(C::widen(row[c]) + C::widen(bias[c]));
  }
}

template <class C>
DDP_AVX_F16C void bias_grad_columns_avx(const lowp16* dy, size_t rows, size_t cols, size_t c_begin, size_t c_end,
                                        lowp16* db, bool accumulate) {
  alignas(32) float sums[32];
  size_t c = c_begin;
  // Strips of 32 columns: four accumulators, each row adds 64 contiguous bytes.
  for (; c + 32 <= c_end; c += 32) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t r = 0; r < rows; ++r) {
      const lowp16* p = dy + r * cols + c;
      s0 = _mm256_add_ps(s0, load8(C{}, p));
      s1 = _mm256_add_ps(s1, load8(C{}, p + 8));
      s2 = _mm256_add_ps(s2, load8(C{}, p + 16));
      s3 = _mm256_add_ps(s3, load8(C{}, p + 24));
    }
    _mm256_store_ps(sums, s0);
    _mm256_store_ps(sums + 8, s1);
    _mm256_store_ps(sums + 16, s2);
    _mm256_store_ps(sums + 24, s3);
    for (int j = 0; j < 32; ++j) db[c + j] = C::narrow(sums[j] + (accumulate ? C::widen(db[c + j]) : 0.0f));
  }
  for (; c + 8 <= c_end; c += 8) {
    __m256 s0 = _mm256_setzero_ps();
    for (size_t r = 0; r < rows; ++r) s0 = _mm256_add_ps(s0, load8(C{}, dy + r * cols + c));
    _mm256_store_ps(sums, s0);
    for (int j = 0; j < 8; ++j) db[c + j] = C::narrow(sums[j] + (accumulate ? C::widen(db[c + j]) : 0.0f));
  }
  for (; c < c_end; ++c) {
    float s = 0.0f;
    for (size_t r = 0; r < rows; ++r) s += C::widen(dy[r * cols + c]);
    db[c] = C::narrow(s + (accumulate ? C::widen(db[c]) : 0.0f));
  }
}

template <class C>
DDP_AVX_F16C bool unscale_avx(const lowp16* grads_lowp, float* grads_fp32, size_t count, float inv_scale) {
  const __m256 scale = _mm256_set1_ps(inv_scale);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  __m256 bad = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_mul_ps(load8(C{}, grads_lowp + i), scale);
    if (grads_fp32) _mm256_storeu_ps(grads_fp32 + i, v);
    // |v| < Inf is false for Inf and NaN alike.
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_NLT_UQ));
  }
  bool any_bad = _mm256_movemask_ps(bad) != 0;
  for (; i < count; ++i) {
    const float v = unscale_element<C>(grads_lowp[i], inv_scale);
    if (grads_fp32) grads_fp32[i] = v;
    any_bad |= !is_finite_float(v);
  }
  return any_bad;
}

// Gradient sources of the SGD loop: the unscaled FP32 buffer, or the FP16
// gradients unscaled on the fly (unscale_element, lane for lane).
struct Fp32Grads {
  const float* g;
  DDP_AVX_F16C __m256 load(size_t i) const { return _mm256_loadu_ps(g + i); }
  float at(size_t i) const { return g[i]; }
};
template <class C>
struct LowpGradsUnscaled {
  const lowp16* g;
  float inv_scale;
  DDP_AVX_F16C __m256 load(size_t i) const { return _mm256_mul_ps(load8(C{}, g + i), _mm256_set1_ps(inv_scale)); }
  float at(size_t i) const { return unscale_element<C>(g[i], inv_scale); }
};

template <class C, class Grads>
DDP_AVX_F16C void sgd_avx(const SgdParams& s, Grads grads, float* master_fp32, float* momentum_fp32,
                          lowp16* weights_lowp, size_t count) {
  // Lane for lane the operations of sgd_update_element, in its order.
  const __m256 mult = _mm256_set1_ps(s.grad_multiplier), wd = _mm256_set1_ps(s.weight_decay),
               mom = _mm256_set1_ps(s.momentum), damp = _mm256_set1_ps(1.0f - s.dampening), lr = _mm256_set1_ps(s.lr);
  const bool use_wd = s.weight_decay != 0.0f, use_mom = s.momentum != 0.0f;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 p = _mm256_loadu_ps(master_fp32 + i);
    __m256 g = _mm256_mul_ps(grads.load(i), mult);
    if (use_wd) g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
    if (use_mom) {
      const __m256 buf =
          s.first_step ? g
                       : _mm256_add_ps(_mm256_mul_ps(mom, _mm256_loadu_ps(momentum_fp32 + i)), _mm256_mul_ps(damp, g));
      _mm256_storeu_ps(momentum_fp32 + i, buf);
      g = s.nesterov ? _mm256_add_ps(g, _mm256_mul_ps(mom, buf)) : buf;
    }
    p = _mm256_sub_ps(p, _mm256_mul_ps(lr, g));
    _mm256_storeu_ps(master_fp32 + i, p);
    store8(C{}, weights_lowp + i, p);
  }
  for (; i < count; ++i) {
    sgd_update_element(s, grads.at(i), master_fp32[i], momentum_fp32[i]);
    weights_lowp[i] = C::narrow(master_fp32[i]);
  }
}

// One row of narrow_rows_avx with the epilogue's choices fixed at compile
// time, so the 8-lane loop has no branches: kBias adds the bias, kPre
// stores the pre-activation, kMode is 0 (nothing more), 1 (relu as a mask),
// 2 (relu' from z as a mask), 3 (any other, through the scalar function),
// 4 (GELU-tanh), 5 (GELU-tanh' from z), the last two through
// cpu_gelu_tanh.h's lanes (the scalar tail through its scalar twin).
// Lane for lane gemm_epilogue_element: relu'/relu as masks are z > 0 ? v : +0
// (NaN gives +0), exactly relu_backward/relu_forward.
template <class C, bool kBias, bool kPre, int kMode>
DDP_AVX_F16C void narrow_row_avx(const float* src, const float* bias, lowp16* pre, const lowp16* z, Activation act,
                                 Activation dact, lowp16* dst, size_t cols) {
  const __m256 zero = _mm256_setzero_ps();
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 v = _mm256_loadu_ps(src + c);
    if (kBias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + c));
    if (kPre) store8(C{}, pre + c, v);
    if (kMode == 1) v = _mm256_and_ps(v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
    if (kMode == 2) v = _mm256_and_ps(v, _mm256_cmp_ps(load8(C{}, z + c), zero, _CMP_GT_OQ));
    if (kMode == 3) {
      alignas(32) float vt[8], zt[8] = {};
      _mm256_store_ps(vt, v);
      if (dact != Activation::None) _mm256_store_ps(zt, load8(C{}, z + c));
      for (int l = 0; l < 8; ++l) vt[l] = cpu_epilogue_activation(act, dact, zt[l], vt[l]);
      v = _mm256_load_ps(vt);
    }
    if (kMode == 4) v = gelu_tanh_forward8(v);
    if (kMode == 5) v = gelu_tanh_backward8(load8(C{}, z + c), v);
    store8(C{}, dst + c, v);
  }
  for (; c < cols; ++c) {
    float v = src[c];
    if (kBias) v += bias[c];
    if (kPre) pre[c] = C::narrow(v);
    dst[c] = C::narrow(cpu_epilogue_activation(act, dact, z ? C::widen(z[c]) : 0.0f, v));
  }
}

template <class C, bool kBias, bool kPre, int kMode>
DDP_AVX_F16C void narrow_rows_avx_fixed(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out,
                                        size_t ldo, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r)
    narrow_row_avx<C, kBias, kPre, kMode>(
        c_fp32 + r * ldc, e.bias_fp32, kPre ? e.pre_activation + r * e.ld_pre_activation : nullptr,
        e.dact_input ? e.dact_input + r * e.ld_dact_input : nullptr, e.act, e.dact, out + r * ldo, cols);
}

template <class C, bool kBias, bool kPre>
DDP_AVX_F16C void narrow_rows_avx_mode(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out,
                                       size_t ldo, size_t rows, size_t cols) {
  const bool none = e.act == Activation::None && e.dact == Activation::None;
  if (none) return narrow_rows_avx_fixed<C, kBias, kPre, 0>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.act == Activation::Relu) return narrow_rows_avx_fixed<C, kBias, kPre, 1>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.dact == Activation::Relu) return narrow_rows_avx_fixed<C, kBias, kPre, 2>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.act == Activation::GeluTanh && e.dact == Activation::None)
    return narrow_rows_avx_fixed<C, kBias, kPre, 4>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.dact == Activation::GeluTanh && e.act == Activation::None)
    return narrow_rows_avx_fixed<C, kBias, kPre, 5>(c_fp32, ldc, e, out, ldo, rows, cols);
  narrow_rows_avx_fixed<C, kBias, kPre, 3>(c_fp32, ldc, e, out, ldo, rows, cols);
}

template <class C>
DDP_AVX_F16C void narrow_rows_avx(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out, size_t ldo,
                                  size_t rows, size_t cols) {
  if (e.bias_fp32) {
    if (e.pre_activation) return narrow_rows_avx_mode<C, true, true>(c_fp32, ldc, e, out, ldo, rows, cols);
    return narrow_rows_avx_mode<C, true, false>(c_fp32, ldc, e, out, ldo, rows, cols);
  }
  if (e.pre_activation) return narrow_rows_avx_mode<C, false, true>(c_fp32, ldc, e, out, ldo, rows, cols);
  narrow_rows_avx_mode<C, false, false>(c_fp32, ldc, e, out, ldo, rows, cols);
}

// BF16's bulk conversions (FP16's are half_convert.h's); return how many
// elements they did, a multiple of 8.
DDP_AVX_F16C size_t widen_bf16_avx(const lowp16* src, float* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(dst + i, load8(Bf16Codec{}, src + i));
  return i;
}

DDP_AVX_F16C size_t narrow_bf16_avx(const float* src, lowp16* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) store8(Bf16Codec{}, dst + i, _mm256_loadu_ps(src + i));
  return i;
}

#endif  // DDP_X86

template <class C>
void widen_array(C, const lowp16* src, float* dst, size_t count) {
  if (C::kPrecision == Precision::Fp16) return half_to_float_array(src, dst, count);
  size_t i = 0;
#if DDP_X86
  if (f16c_available()) i = widen_bf16_avx(src, dst, count);
#endif
  for (; i < count; ++i) dst[i] = C::widen(src[i]);
}

template <class C>
void narrow_array(C, const float* src, lowp16* dst, size_t count) {
  if (C::kPrecision == Precision::Fp16) return float_to_half_array(src, dst, count);
  size_t i = 0;
#if DDP_X86
  if (f16c_available()) i = narrow_bf16_avx(src, dst, count);
#endif
  for (; i < count; ++i) dst[i] = C::narrow(src[i]);
}

template <class C>
void narrow_rows_any(C, const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out, size_t ldo, size_t rows,
                     size_t cols) {
  const bool plain = !e.bias_fp32 && !e.pre_activation && e.act == Activation::None && e.dact == Activation::None;
#if DDP_X86
  if (f16c_available()) return narrow_rows_avx<C>(c_fp32, ldc, e, out, ldo, rows, cols);
#endif
  for (size_t r = 0; r < rows; ++r) {
    const float* src = c_fp32 + r * ldc;
    lowp16* dst = out + r * ldo;
    if (plain) {
      narrow_array(C{}, src, dst, cols);
      continue;
    }
    lowp16* pre = e.pre_activation ? e.pre_activation + r * e.ld_pre_activation : nullptr;
    const lowp16* z = e.dact_input ? e.dact_input + r * e.ld_dact_input : nullptr;
    for (size_t c = 0; c < cols; ++c) {
      float v = src[c];
      if (e.bias_fp32) v += e.bias_fp32[c];
      if (pre) pre[c] = C::narrow(v);
      dst[c] = C::narrow(cpu_epilogue_activation(e.act, e.dact, z ? C::widen(z[c]) : 0.0f, v));
    }
  }
}

template <class C>
void bias_grad_op_a_any(C, const float* a_fp32, size_t ld, bool a_transposed, size_t k, size_t i_begin, size_t i_end,
                        lowp16* db, bool accumulate) {
  if (!a_transposed) {  // row sums of stored rows
    for (size_t i = i_begin; i < i_end; ++i) {
      float s = 0.0f;
      for (size_t p = 0; p < k; ++p) s += a_fp32[i * ld + p];
      db[i] = C::narrow(s + (accumulate ? C::widen(db[i]) : 0.0f));
    }
    return;
  }
  // Column sums of stored rows, a strip of columns at a time: each column's
  // sum still runs over p in order (the strip only lets the adds of
  // neighbouring columns share vector instructions).
  constexpr size_t kStrip = 256;
  float sums[kStrip];
  for (size_t i0 = i_begin; i0 < i_end; i0 += kStrip) {
    const size_t width = std::min(kStrip, i_end - i0);
    for (size_t l = 0; l < width; ++l) sums[l] = 0.0f;
    for (size_t p = 0; p < k; ++p) {
      const float* row = a_fp32 + p * ld + i0;
      for (size_t l = 0; l < width; ++l) sums[l] += row[l];
    }
    for (size_t l = 0; l < width; ++l) db[i0 + l] = C::narrow(sums[l] + (accumulate ? C::widen(db[i0 + l]) : 0.0f));
  }
}

#if DDP_X86
template <class C>
DDP_AVX_F16C void add_avx(const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) store8(C{}, y + i, _mm256_add_ps(load8(C{}, a + i), load8(C{}, b + i)));
  for (; i < count; ++i) y[i] = C::narrow(C::widen(a[i]) + C::widen(b[i]));
}
#endif

}  // namespace

void activation_forward_range(Precision p, Activation act, const lowp16* z, lowp16* y, size_t count) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return activation_forward_avx<C>(act, z, y, count);
#endif
    for (size_t i = 0; i < count; ++i) y[i] = C::narrow(cpu_activation_forward(act, C::widen(z[i])));
  });
}

void activation_backward_range(Precision p, Activation act, const lowp16* z, const lowp16* dy, lowp16* dz,
                               size_t count) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return activation_backward_avx<C>(act, z, dy, dz, count);
#endif
    for (size_t i = 0; i < count; ++i) dz[i] = C::narrow(cpu_activation_backward(act, C::widen(z[i]), C::widen(dy[i])));
  });
}

void add_bias_rows(Precision p, lowp16* y, const lowp16* bias, size_t rows, size_t cols) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return add_bias_rows_avx<C>(y, bias, rows, cols);
#endif
    for (size_t r = 0; r < rows; ++r) {
      lowp16* row = y + r * cols;
      for (size_t c = 0; c < cols; ++c) row[c] = C::narrow(C::widen(row[c]) + C::widen(bias[c]));
    }
  });
}

void bias_grad_columns(Precision p, const lowp16* dy, size_t rows, size_t cols, size_t c_begin, size_t c_end,
                       lowp16* db, bool accumulate) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return bias_grad_columns_avx<C>(dy, rows, cols, c_begin, c_end, db, accumulate);
#endif
    for (size_t c = c_begin; c < c_end; ++c) {
      float s = 0.0f;
      for (size_t r = 0; r < rows; ++r) s += C::widen(dy[r * cols + c]);
      db[c] = C::narrow(s + (accumulate ? C::widen(db[c]) : 0.0f));
    }
  });
}

bool unscale_range(Precision p, const lowp16* grads_lowp, float* grads_fp32, size_t count, float inv_scale) {
  return with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return unscale_avx<C>(grads_lowp, grads_fp32, count, inv_scale);
#endif
    bool bad = false;
    for (size_t i = 0; i < count; ++i) {
      const float v = unscale_element<C>(grads_lowp[i], inv_scale);
      if (grads_fp32) grads_fp32[i] = v;
      bad |= !is_finite_float(v);
    }
    return bad;
  });
}

// A plain loop: g++ vectorises the multiply, and the flag is an OR of
// per-element tests, so the order does not matter.
bool unscale_fp32_range(const float* grads_in, float* grads_out, size_t count, float inv_scale) {
  bool bad = false;
  for (size_t i = 0; i < count; ++i) {
    const float v = grads_in[i] * inv_scale;
    grads_out[i] = v;
    bad |= !is_finite_float(v);
  }
  return bad;
}

void sgd_range(Precision p, const SgdParams& params, const float* grads_fp32, float* master_fp32, float* momentum_fp32,
               lowp16* weights_lowp, size_t count) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available() && momentum_fp32)
      return sgd_avx<C>(params, Fp32Grads{grads_fp32}, master_fp32, momentum_fp32, weights_lowp, count);
#endif
    for (size_t i = 0; i < count; ++i) {
      float dummy = 0.0f;
      sgd_update_element(params, grads_fp32[i], master_fp32[i], momentum_fp32 ? momentum_fp32[i] : dummy);
    }
    narrow_array(codec, master_fp32, weights_lowp, count);
  });
}

void sgd_lowp_grads_range(Precision p, const SgdParams& params, const lowp16* grads_lowp, float inv_scale,
                          float* master_fp32, float* momentum_fp32, lowp16* weights_lowp, size_t count) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available() && momentum_fp32)
      return sgd_avx<C>(params, LowpGradsUnscaled<C>{grads_lowp, inv_scale}, master_fp32, momentum_fp32, weights_lowp,
                        count);
#endif
    for (size_t i = 0; i < count; ++i) {
      float dummy = 0.0f;
      sgd_update_element(params, unscale_element<C>(grads_lowp[i], inv_scale), master_fp32[i],
                         momentum_fp32 ? momentum_fp32[i] : dummy);
    }
    narrow_array(codec, master_fp32, weights_lowp, count);
  });
}

void widen_rows(Precision p, const lowp16* src, size_t ld_src, float* dst, size_t ld_dst, size_t rows, size_t cols) {
  with_codec(p, [&](auto codec) {
    if (ld_src == cols && ld_dst == cols) return widen_array(codec, src, dst, rows * cols);
    for (size_t r = 0; r < rows; ++r) widen_array(codec, src + r * ld_src, dst + r * ld_dst, cols);
  });
}

void widen_lowp(Precision p, const lowp16* src, float* dst, size_t count) {
  with_codec(p, [&](auto codec) { widen_array(codec, src, dst, count); });
}

void narrow_fp32(Precision p, const float* src, lowp16* dst, size_t count) {
  with_codec(p, [&](auto codec) { narrow_array(codec, src, dst, count); });
}

// An FP32 add rounds the same in a vector lane as in scalar code.
void add_lowp_range(Precision p, const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
#if DDP_X86
    if (f16c_available()) return add_avx<C>(a, b, y, count);
#endif
    for (size_t i = 0; i < count; ++i) y[i] = C::narrow(C::widen(a[i]) + C::widen(b[i]));
  });
}

NarrowEpilogue NarrowEpilogue::at(size_t row, size_t col) const {
  NarrowEpilogue e = *this;
  if (e.bias_fp32) e.bias_fp32 += col;
  if (e.pre_activation) e.pre_activation += row * ld_pre_activation + col;
  if (e.dact_input) e.dact_input += row * ld_dact_input + col;
  return e;
}

void narrow_rows(Precision p, const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out, size_t ldo,
                 size_t rows, size_t cols) {
  with_codec(p, [&](auto codec) { narrow_rows_any(codec, c_fp32, ldc, e, out, ldo, rows, cols); });
}

void bias_grad_op_a(Precision p, const float* a_fp32, size_t ld, bool a_transposed, size_t k, size_t i_begin,
                    size_t i_end, lowp16* db, bool accumulate) {
  with_codec(
      p, [&](auto codec) { bias_grad_op_a_any(codec, a_fp32, ld, a_transposed, k, i_begin, i_end, db, accumulate); });
}

}  // namespace ddp::cpu
