// cpu_elementwise.h: the CPU backend's element-wise loops over one range,
// the unit CpuBackend hands to each thread of its CpuThreadPool.
//
// Each loop is a template over the working precision's codec
// (lowp_codec.h), chosen once per call from the `Precision` argument, with
// an F16C/AVX path (8 elements per instruction, conversions fused into the
// same pass: cpu_lowp_simd.h) and the portable scalar path of half.h and
// bfloat16.h, chosen with f16c_available() as half_convert.h does. In the
// comments below lowp(x) is x rounded to that precision (RNE). Both compute, element by
// element, the same FP32 operations in the same order as the scalar
// definitions in elementwise_math.h, with no FMA contraction, so their
// results are bit-identical (tests/kernels/cpu/test_cpu_elementwise.cpp checks it).
#pragma once

#include <cstddef>

#include "kernels/elementwise_math.h"
#include "kernels/lowp_codec.h"

namespace ddp::cpu {

// y[i] = lowp(act(z[i])); z may equal y.
void activation_forward_range(Precision p, Activation act, const lowp16* z, lowp16* y, size_t count);
// dz[i] = lowp(act'(z[i]) * dy[i]); dz may equal dy.
void activation_backward_range(Precision p, Activation act, const lowp16* z, const lowp16* dy, lowp16* dz,
                               size_t count);
// y[r, c] = lowp(y[r, c] + bias[c]) for rows r of one [rows, cols] block.
void add_bias_rows(Precision p, lowp16* y, const lowp16* bias, size_t rows, size_t cols);
// db[c] = lowp(sum_r dy[r, c] (+ db[c] when accumulate)) for c in [c_begin, c_end):
// an FP32 sum over r in increasing order, whatever the column range.  dy: [rows, cols]
void bias_grad_columns(Precision p, const lowp16* dy, size_t rows, size_t cols, size_t c_begin, size_t c_end,
                       lowp16* db, bool accumulate);
// grads_fp32[i] = unscale_element(grads_lowp[i], inv_scale) (grads_fp32 may
// be null: the check alone); true when any result is Inf/NaN.
bool unscale_range(Precision p, const lowp16* grads_lowp, float* grads_fp32, size_t count, float inv_scale);
// grads_out[i] = grads_in[i] * inv_scale (in place allowed); true when any
// result is Inf/NaN.
bool unscale_fp32_range(const float* grads_in, float* grads_out, size_t count, float inv_scale);
// sgd_update_element on each element (momentum_fp32 may be null: no buffer
// kept; the SGD op's CPU row passes null only with params.momentum == 0),
// then weights_lowp[i] = lowp(master_fp32[i]).
void sgd_range(Precision p, const SgdParams& params, const float* grads_fp32, float* master_fp32, float* momentum_fp32,
               lowp16* weights_lowp, size_t count);
// The same with the gradient unscale_element(grads_lowp[i], inv_scale): bitwise
// equal to unscale_range into a buffer, then sgd_range on it.
void sgd_lowp_grads_range(Precision p, const SgdParams& params, const lowp16* grads_lowp, float inv_scale,
                          float* master_fp32, float* momentum_fp32, lowp16* weights_lowp, size_t count);

// GEMM operand and result passes.
// dst[r * ld_dst + c] = float(src[r * ld_src + c]) for a rows x cols block.
void widen_rows(Precision p, const lowp16* src, size_t ld_src, float* dst, size_t ld_dst, size_t rows, size_t cols);
// dst[i] = float(src[i]).
void widen_lowp(Precision p, const lowp16* src, float* dst, size_t count);
// dst[i] = lowp(src[i]).
void narrow_fp32(Precision p, const float* src, lowp16* dst, size_t count);
// y[i] = lowp(float(a[i]) + float(b[i])); y may be a or b.
void add_lowp_range(Precision p, const lowp16* a, const lowp16* b, lowp16* y, size_t count);
// The GemmLowp epilogue (backend.h, gemm_epilogue.h) of one block of the
// output, its pointers already offset to the block's first element.
struct NarrowEpilogue {
  const float* bias_fp32 = nullptr;  // [cols], widened exactly from the working precision
  Activation act = Activation::None;
  lowp16* pre_activation = nullptr;
  size_t ld_pre_activation = 0;
  Activation dact = Activation::None;
  const lowp16* dact_input = nullptr;
  size_t ld_dact_input = 0;
  // The same epilogue for the block starting at (row, col).
  NarrowEpilogue at(size_t row, size_t col) const;
};
// out[r * ldo + c] = lowp(epilogue(c_fp32[r * ldc + c])): the one rounding
// of a GEMM result, with the bias, pre-activation output and activation (or
// its gradient) of `epilogue` applied in FP32 first, element by element as
// gemm_epilogue_element.
void narrow_rows(Precision p, const float* c_fp32, size_t ldc, const NarrowEpilogue& epilogue, lowp16* out, size_t ldo,
                 size_t rows, size_t cols);
// db[i] = lowp(sum_p opA[i, p] (+ db[i] when accumulate)) for i in
// [i_begin, i_end): an FP32 sum over p = 0..k-1 in increasing order, as
// bias_grad_columns, of the widened A: opA[i, p] = a_fp32[p * ld + i] when
// a_transposed (stored k x m), a_fp32[i * ld + p] otherwise.
void bias_grad_op_a(Precision p, const float* a_fp32, size_t ld, bool a_transposed, size_t k, size_t i_begin,
                    size_t i_end, lowp16* db, bool accumulate);

}  // namespace ddp::cpu
