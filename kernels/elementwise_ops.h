// elementwise_ops.h: the element-wise family of the Backend (backend.h):
// FP32 math on each element, one round-to-nearest-even to FP16.
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

  // y[r,c] = fp16(y[r,c] + bias[c])                      y: [rows, cols]
  virtual void add_bias_fp16(half16* y, const half16* bias, int rows, int cols) = 0;
  // y = fp16(act(z)); z may equal y.
  virtual void activation_forward_fp16(Activation act, const half16* z, half16* y, size_t count) = 0;
  // dz = fp16(act'(z) * dy); dz may equal dy.
  virtual void activation_backward_fp16(Activation act, const half16* z, const half16* dy, half16* dz,
                                        size_t count) = 0;
  // db[c] = fp16(sum_r dy[r,c] (+ db[c] when accumulate)), FP32 sum.   dy: [rows, cols]
  virtual void bias_grad_fp16(const half16* dy, int rows, int cols, half16* db, bool accumulate) = 0;
  virtual void cast_fp32_to_fp16(const float* src, half16* dst, size_t count) = 0;
  virtual void cast_fp16_to_fp32(const half16* src, float* dst, size_t count) = 0;
  // y[i] = fp16(a[i] + b[i]) (FP32 add): the residual add; y may equal a or
  // b (y == a is the in-place accumulate x += f(x)).
  virtual void add_fp16(const half16* a, const half16* b, half16* y, size_t count) = 0;
};

}  // namespace ddp
