// elementwise_ops.h: the element-wise family of the Backend (backend.h):
// FP32 math on each element, one round-to-nearest-even to the backend's
// 16-bit precision (fp16() below: FP16 or BF16 alike). The unfused
// passes the fused GEMM epilogues replaced (bias add, activation and its
// gradient, bias-gradient column sums, FP16 -> FP32 casts) are not ops: the
// tests' references have them (tests/support/unfused_ops.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/elementwise_math.h"
#include "kernels/half.h"

namespace ddp {

// Implemented by each backend (cpu_elementwise.h, cuda_elementwise.h).
class ElementwiseOps {
 public:
  virtual ~ElementwiseOps() = default;

  // dst[i] = fp16(src[i]) (round to nearest even): the FP32 masters' FP16 copy.
  virtual void cast_fp32_to_lowp(const float* src, lowp16* dst, size_t count) = 0;
  // y[i] = fp16(a[i] + b[i]) (FP32 add): the residual add; y may equal a or
  // b (y == a is the in-place accumulate x += f(x)).
  virtual void add_lowp(const lowp16* a, const lowp16* b, lowp16* y, size_t count) = 0;
  // y[i] = fp16(float(y[i]) + src[i]): an FP32 sum added to an FP16 one with
  // one rounding, as a GEMM with beta 1 adds its sum to C (the streamed
  // classifier's d_wte under gradient accumulation).
  virtual void add_fp32_into_lowp(const float* src, lowp16* y, size_t count) = 0;
};

}  // namespace ddp
