// unfused_ops.h: the element-wise passes the fused GEMM epilogues replaced
// (bias add, activation, activation gradient, bias-gradient column sums)
// and the 16-bit -> FP32 cast, as the tests' references: no model calls
// them, so they are not Backend ops. Each runs on host memory (a
// CpuBackend's buffers) through the CPU's own element loops
// (kernels/cpu/cpu_elementwise.h, F16C or scalar, bit-identical), on one
// thread: the fused epilogues are checked against them bit for bit. The
// precision (lowp_codec.h) is FP16 unless given, lowp(x) below.
#pragma once

#include <cstddef>

#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/half.h"
#include "kernels/half_convert.h"

namespace ddp::test {

// y[r, c] = lowp(y[r, c] + bias[c])                      y: [rows, cols]
inline void add_bias_lowp(lowp16* y, const lowp16* bias, int rows, int cols, Precision p = Precision::Fp16) {
  cpu::add_bias_rows(p, y, bias, static_cast<size_t>(rows), static_cast<size_t>(cols));
}
// y = lowp(act(z)); z may equal y.
inline void activation_forward_lowp(Activation act, const lowp16* z, lowp16* y, size_t count,
                                    Precision p = Precision::Fp16) {
  cpu::activation_forward_range(p, act, z, y, count);
}
// dz = lowp(act'(z) * dy); dz may equal dy.
inline void activation_backward_lowp(Activation act, const lowp16* z, const lowp16* dy, lowp16* dz, size_t count,
                                     Precision p = Precision::Fp16) {
  cpu::activation_backward_range(p, act, z, dy, dz, count);
}
// db[c] = lowp(sum_r dy[r, c] (+ db[c] when accumulate)), FP32 sums in row order.   dy: [rows, cols]
inline void bias_grad_lowp(const lowp16* dy, int rows, int cols, lowp16* db, bool accumulate,
                           Precision p = Precision::Fp16) {
  const size_t width = static_cast<size_t>(cols);
  cpu::bias_grad_columns(p, dy, static_cast<size_t>(rows), width, 0, width, db, accumulate);
}
// dst[i] = float(src[i]) (exact).
inline void cast_lowp_to_fp32(const lowp16* src, float* dst, size_t count, Precision p = Precision::Fp16) {
  cpu::widen_lowp(p, src, dst, count);
}

}  // namespace ddp::test
