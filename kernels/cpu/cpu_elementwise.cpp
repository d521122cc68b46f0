// cpu_elementwise.cpp: F16C/AVX loops (8 lanes) with the portable scalar
// loops of half.h as fallback and for the tails. No FMA: the target
// attributes below name avx and f16c only, so the compiler cannot contract
// a*b+c and every lane rounds exactly as the scalar definition does.
#include "kernels/cpu/cpu_elementwise.h"

#include <algorithm>

#include "kernels/gemm_epilogue.h"
#include "kernels/half_convert.h"

#include "kernels/cpu/cpu_activation.h"
#include "kernels/cpu/cpu_gelu_tanh.h"
#include "kernels/cpu/cpu_simd.h"

namespace ddp::cpu {
namespace {

#if DDP_X86
DDP_AVX_F16C inline __m256 load8(const lowp16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
DDP_AVX_F16C inline void store8(lowp16* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

DDP_AVX_F16C void activation_forward_f16c(Activation act, const lowp16* z, lowp16* y, size_t count) {
  size_t i = 0;
  if (act == Activation::Relu) {
    const __m256 zero = _mm256_setzero_ps();
    // z > 0 ? z : +0 (NaN and -0 give +0), as relu_forward.
    for (; i + 8 <= count; i += 8) {
      const __m256 v = load8(z + i);
      store8(y + i, _mm256_and_ps(v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ)));
    }
  } else if (act == Activation::None) {
    for (; i + 8 <= count; i += 8) store8(y + i, load8(z + i));
  } else if (act == Activation::GeluTanh) {
    for (; i + 8 <= count; i += 8) store8(y + i, gelu_tanh_forward8(load8(z + i)));
  } else {
    alignas(32) float tmp[8];
    for (; i + 8 <= count; i += 8) {
      _mm256_store_ps(tmp, load8(z + i));
      for (float& v : tmp) v = cpu_activation_forward(act, v);
      store8(y + i, _mm256_load_ps(tmp));
    }
  }
  for (; i < count; ++i) y[i] = to_half(cpu_activation_forward(act, half_to_float(z[i])));
}

DDP_AVX_F16C void activation_backward_f16c(Activation act, const lowp16* z, const lowp16* dy, lowp16* dz,
                                           size_t count) {
  size_t i = 0;
  if (act == Activation::Relu) {
    const __m256 zero = _mm256_setzero_ps();
    // z > 0 ? dy : +0, as relu_backward.
    for (; i + 8 <= count; i += 8) {
      const __m256 mask = _mm256_cmp_ps(load8(z + i), zero, _CMP_GT_OQ);
      store8(dz + i, _mm256_and_ps(load8(dy + i), mask));
    }
  } else if (act == Activation::None) {
    for (; i + 8 <= count; i += 8) store8(dz + i, load8(dy + i));
  } else if (act == Activation::GeluTanh) {
    for (; i + 8 <= count; i += 8) store8(dz + i, gelu_tanh_backward8(load8(z + i), load8(dy + i)));
  } else {
    alignas(32) float zt[8], dyt[8];
    for (; i + 8 <= count; i += 8) {
      _mm256_store_ps(zt, load8(z + i));
      _mm256_store_ps(dyt, load8(dy + i));
      for (int l = 0; l < 8; ++l) dyt[l] = cpu_activation_backward(act, zt[l], dyt[l]);
      store8(dz + i, _mm256_load_ps(dyt));
    }
  }
  for (; i < count; ++i) dz[i] = to_half(cpu_activation_backward(act, half_to_float(z[i]), half_to_float(dy[i])));
}

DDP_AVX_F16C void add_bias_rows_f16c(lowp16* y, const lowp16* bias, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    lowp16* row = y + r * cols;
    size_t c = 0;
    for (; c + 8 <= cols; c += 8) store8(row + c, _mm256_add_ps(load8(row + c), load8(bias + c)));
    for (; c < cols; ++c) row[c] = to_half(half_to_float(row[c]) + half_to_float(bias[c]));
  }
}

DDP_AVX_F16C void bias_grad_columns_f16c(const lowp16* dy, size_t rows, size_t cols, size_t c_begin, size_t c_end,
                                         lowp16* db, bool accumulate) {
  alignas(32) float sums[32];
  size_t c = c_begin;
  // Strips of 32 columns: four accumulators, each row adds 64 contiguous bytes.
  for (; c + 32 <= c_end; c += 32) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t r = 0; r < rows; ++r) {
      const lowp16* p = dy + r * cols + c;
      s0 = _mm256_add_ps(s0, load8(p));
      s1 = _mm256_add_ps(s1, load8(p + 8));
      s2 = _mm256_add_ps(s2, load8(p + 16));
      s3 = _mm256_add_ps(s3, load8(p + 24));
    }
    _mm256_store_ps(sums, s0);
    _mm256_store_ps(sums + 8, s1);
    _mm256_store_ps(sums + 16, s2);
    _mm256_store_ps(sums + 24, s3);
    for (int j = 0; j < 32; ++j) db[c + j] = to_half(sums[j] + (accumulate ? half_to_float(db[c + j]) : 0.0f));
  }
  for (; c + 8 <= c_end; c += 8) {
    __m256 s0 = _mm256_setzero_ps();
    for (size_t r = 0; r < rows; ++r) s0 = _mm256_add_ps(s0, load8(dy + r * cols + c));
    _mm256_store_ps(sums, s0);
    for (int j = 0; j < 8; ++j) db[c + j] = to_half(sums[j] + (accumulate ? half_to_float(db[c + j]) : 0.0f));
  }
  for (; c < c_end; ++c) {
    float s = 0.0f;
    for (size_t r = 0; r < rows; ++r) s += half_to_float(dy[r * cols + c]);
    db[c] = to_half(s + (accumulate ? half_to_float(db[c]) : 0.0f));
  }
}

DDP_AVX_F16C bool unscale_f16c(const lowp16* grads_lowp, float* grads_fp32, size_t count, float inv_scale) {
  const __m256 scale = _mm256_set1_ps(inv_scale);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  __m256 bad = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_mul_ps(load8(grads_lowp + i), scale);
    if (grads_fp32) _mm256_storeu_ps(grads_fp32 + i, v);
    // |v| < Inf is false for Inf and NaN alike.
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_NLT_UQ));
  }
  bool any_bad = _mm256_movemask_ps(bad) != 0;
  for (; i < count; ++i) {
    const float v = unscale_element(grads_lowp[i], inv_scale);
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
struct LowpGradsUnscaled {
  const lowp16* g;
  float inv_scale;
  DDP_AVX_F16C __m256 load(size_t i) const { return _mm256_mul_ps(load8(g + i), _mm256_set1_ps(inv_scale)); }
  float at(size_t i) const { return unscale_element(g[i], inv_scale); }
};

template <class Grads>
DDP_AVX_F16C void sgd_f16c(const SgdParams& s, Grads grads, float* master_fp32, float* momentum_fp32,
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
    store8(weights_lowp + i, p);
  }
  for (; i < count; ++i) {
    sgd_update_element(s, grads.at(i), master_fp32[i], momentum_fp32[i]);
    weights_lowp[i] = to_half(master_fp32[i]);
  }
}

// One row of narrow_rows_f16c with the epilogue's choices fixed at compile
// time, so the 8-lane loop has no branches: kBias adds the bias, kPre
// stores the pre-activation, kMode is 0 (nothing more), 1 (relu as a mask),
// 2 (relu' from z as a mask), 3 (any other, through the scalar function),
// 4 (GELU-tanh), 5 (GELU-tanh' from z), the last two through
// cpu_gelu_tanh.h's lanes (the scalar tail through its scalar twin).
// Lane for lane gemm_epilogue_element: relu'/relu as masks are z > 0 ? v : +0
// (NaN gives +0), exactly relu_backward/relu_forward.
template <bool kBias, bool kPre, int kMode>
DDP_AVX_F16C void narrow_row_f16c(const float* src, const float* bias, lowp16* pre, const lowp16* z, Activation act,
                                  Activation dact, lowp16* dst, size_t cols) {
  const __m256 zero = _mm256_setzero_ps();
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 v = _mm256_loadu_ps(src + c);
    if (kBias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + c));
    if (kPre) store8(pre + c, v);
    if (kMode == 1) v = _mm256_and_ps(v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
    if (kMode == 2) v = _mm256_and_ps(v, _mm256_cmp_ps(load8(z + c), zero, _CMP_GT_OQ));
    if (kMode == 3) {
      alignas(32) float vt[8], zt[8] = {};
      _mm256_store_ps(vt, v);
      if (dact != Activation::None) _mm256_store_ps(zt, load8(z + c));
      for (int l = 0; l < 8; ++l) vt[l] = cpu_epilogue_activation(act, dact, zt[l], vt[l]);
      v = _mm256_load_ps(vt);
    }
    if (kMode == 4) v = gelu_tanh_forward8(v);
    if (kMode == 5) v = gelu_tanh_backward8(load8(z + c), v);
    store8(dst + c, v);
  }
  for (; c < cols; ++c) {
    float v = src[c];
    if (kBias) v += bias[c];
    if (kPre) pre[c] = to_half(v);
    dst[c] = to_half(cpu_epilogue_activation(act, dact, z ? half_to_float(z[c]) : 0.0f, v));
  }
}

template <bool kBias, bool kPre, int kMode>
DDP_AVX_F16C void narrow_rows_f16c_fixed(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out,
                                         size_t ldo, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r)
    narrow_row_f16c<kBias, kPre, kMode>(
        c_fp32 + r * ldc, e.bias_fp32, kPre ? e.pre_activation + r * e.ld_pre_activation : nullptr,
        e.dact_input ? e.dact_input + r * e.ld_dact_input : nullptr, e.act, e.dact, out + r * ldo, cols);
}

template <bool kBias, bool kPre>
DDP_AVX_F16C void narrow_rows_f16c_mode(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out,
                                        size_t ldo, size_t rows, size_t cols) {
  const bool none = e.act == Activation::None && e.dact == Activation::None;
  if (none) return narrow_rows_f16c_fixed<kBias, kPre, 0>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.act == Activation::Relu) return narrow_rows_f16c_fixed<kBias, kPre, 1>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.dact == Activation::Relu) return narrow_rows_f16c_fixed<kBias, kPre, 2>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.act == Activation::GeluTanh && e.dact == Activation::None)
    return narrow_rows_f16c_fixed<kBias, kPre, 4>(c_fp32, ldc, e, out, ldo, rows, cols);
  if (e.dact == Activation::GeluTanh && e.act == Activation::None)
    return narrow_rows_f16c_fixed<kBias, kPre, 5>(c_fp32, ldc, e, out, ldo, rows, cols);
  narrow_rows_f16c_fixed<kBias, kPre, 3>(c_fp32, ldc, e, out, ldo, rows, cols);
}

DDP_AVX_F16C void narrow_rows_f16c(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out, size_t ldo,
                                   size_t rows, size_t cols) {
  if (e.bias_fp32) {
    if (e.pre_activation) return narrow_rows_f16c_mode<true, true>(c_fp32, ldc, e, out, ldo, rows, cols);
    return narrow_rows_f16c_mode<true, false>(c_fp32, ldc, e, out, ldo, rows, cols);
  }
  if (e.pre_activation) return narrow_rows_f16c_mode<false, true>(c_fp32, ldc, e, out, ldo, rows, cols);
  narrow_rows_f16c_mode<false, false>(c_fp32, ldc, e, out, ldo, rows, cols);
}

#endif  // DDP_X86

}  // namespace

void activation_forward_range(Activation act, const lowp16* z, lowp16* y, size_t count) {
#if DDP_X86
  if (f16c_available()) return activation_forward_f16c(act, z, y, count);
#endif
  for (size_t i = 0; i < count; ++i) y[i] = to_half(cpu_activation_forward(act, half_to_float(z[i])));
}

void activation_backward_range(Activation act, const lowp16* z, const lowp16* dy, lowp16* dz, size_t count) {
#if DDP_X86
  if (f16c_available()) return activation_backward_f16c(act, z, dy, dz, count);
#endif
  for (size_t i = 0; i < count; ++i)
    dz[i] = to_half(cpu_activation_backward(act, half_to_float(z[i]), half_to_float(dy[i])));
}

void add_bias_rows(lowp16* y, const lowp16* bias, size_t rows, size_t cols) {
#if DDP_X86
  if (f16c_available()) return add_bias_rows_f16c(y, bias, rows, cols);
#endif
  for (size_t r = 0; r < rows; ++r) {
    lowp16* row = y + r * cols;
    for (size_t c = 0; c < cols; ++c) row[c] = to_half(half_to_float(row[c]) + half_to_float(bias[c]));
  }
}

void bias_grad_columns(const lowp16* dy, size_t rows, size_t cols, size_t c_begin, size_t c_end, lowp16* db,
                       bool accumulate) {
#if DDP_X86
  if (f16c_available()) return bias_grad_columns_f16c(dy, rows, cols, c_begin, c_end, db, accumulate);
#endif
  for (size_t c = c_begin; c < c_end; ++c) {
    float s = 0.0f;
    for (size_t r = 0; r < rows; ++r) s += half_to_float(dy[r * cols + c]);
    db[c] = to_half(s + (accumulate ? half_to_float(db[c]) : 0.0f));
  }
}

bool unscale_range(const lowp16* grads_lowp, float* grads_fp32, size_t count, float inv_scale) {
#if DDP_X86
  if (f16c_available()) return unscale_f16c(grads_lowp, grads_fp32, count, inv_scale);
#endif
  bool bad = false;
  for (size_t i = 0; i < count; ++i) {
    const float v = unscale_element(grads_lowp[i], inv_scale);
    if (grads_fp32) grads_fp32[i] = v;
    bad |= !is_finite_float(v);
  }
  return bad;
}

void sgd_range(const SgdParams& params, const float* grads_fp32, float* master_fp32, float* momentum_fp32,
               lowp16* weights_lowp, size_t count) {
#if DDP_X86
  if (f16c_available() && momentum_fp32)
    return sgd_f16c(params, Fp32Grads{grads_fp32}, master_fp32, momentum_fp32, weights_lowp, count);
#endif
  for (size_t i = 0; i < count; ++i) {
    float dummy = 0.0f;
    sgd_update_element(params, grads_fp32[i], master_fp32[i], momentum_fp32 ? momentum_fp32[i] : dummy);
  }
  float_to_half_array(master_fp32, weights_lowp, count);
}

void sgd_lowp_grads_range(const SgdParams& params, const lowp16* grads_lowp, float inv_scale, float* master_fp32,
                          float* momentum_fp32, lowp16* weights_lowp, size_t count) {
#if DDP_X86
  if (f16c_available() && momentum_fp32)
    return sgd_f16c(params, LowpGradsUnscaled{grads_lowp, inv_scale}, master_fp32, momentum_fp32, weights_lowp, count);
#endif
  for (size_t i = 0; i < count; ++i) {
    float dummy = 0.0f;
    sgd_update_element(params, unscale_element(grads_lowp[i], inv_scale), master_fp32[i],
                       momentum_fp32 ? momentum_fp32[i] : dummy);
  }
  float_to_half_array(master_fp32, weights_lowp, count);
}

void widen_rows(const lowp16* src, size_t ld_src, float* dst, size_t ld_dst, size_t rows, size_t cols) {
  if (ld_src == cols && ld_dst == cols) return half_to_float_array(src, dst, rows * cols);
  for (size_t r = 0; r < rows; ++r) half_to_float_array(src + r * ld_src, dst + r * ld_dst, cols);
}

NarrowEpilogue NarrowEpilogue::at(size_t row, size_t col) const {
  NarrowEpilogue e = *this;
  if (e.bias_fp32) e.bias_fp32 += col;
  if (e.pre_activation) e.pre_activation += row * ld_pre_activation + col;
  if (e.dact_input) e.dact_input += row * ld_dact_input + col;
  return e;
}

void narrow_rows(const float* c_fp32, size_t ldc, const NarrowEpilogue& e, lowp16* out, size_t ldo, size_t rows,
                 size_t cols) {
  const bool plain = !e.bias_fp32 && !e.pre_activation && e.act == Activation::None && e.dact == Activation::None;
#if DDP_X86
  if (f16c_available()) return narrow_rows_f16c(c_fp32, ldc, e, out, ldo, rows, cols);
#endif
  for (size_t r = 0; r < rows; ++r) {
    const float* src = c_fp32 + r * ldc;
    lowp16* dst = out + r * ldo;
    if (plain) {
      float_to_half_array(src, dst, cols);
      continue;
    }
    lowp16* pre = e.pre_activation ? e.pre_activation + r * e.ld_pre_activation : nullptr;
    const lowp16* z = e.dact_input ? e.dact_input + r * e.ld_dact_input : nullptr;
    for (size_t c = 0; c < cols; ++c) {
      float v = src[c];
      if (e.bias_fp32) v += e.bias_fp32[c];
      if (pre) pre[c] = to_half(v);
      dst[c] = to_half(cpu_epilogue_activation(e.act, e.dact, z ? half_to_float(z[c]) : 0.0f, v));
    }
  }
}

void bias_grad_op_a(const float* a_fp32, size_t ld, bool a_transposed, size_t k, size_t i_begin, size_t i_end,
                    lowp16* db, bool accumulate) {
  if (!a_transposed) {  // row sums of stored rows
    for (size_t i = i_begin; i < i_end; ++i) {
      float s = 0.0f;
      for (size_t p = 0; p < k; ++p) s += a_fp32[i * ld + p];
      db[i] = to_half(s + (accumulate ? half_to_float(db[i]) : 0.0f));
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
    for (size_t l = 0; l < width; ++l) db[i0 + l] = to_half(sums[l] + (accumulate ? half_to_float(db[i0 + l]) : 0.0f));
  }
}

}  // namespace ddp::cpu
