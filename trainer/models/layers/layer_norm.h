// layer_norm.h: nn.LayerNorm over the last dimension (weight and bias [C],
// eps kLayerNormEps, transformer_math.h) on a Backend: FP32 statistics from
// FP16 input, one rounding per output. It keeps its output and the rows'
// mean and rstd for backward.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/tensor_range.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

class LayerNorm {
 public:
  LayerNorm(Backend& backend, int channels, size_t max_rows);

  // `<prefix>.weight` then `<prefix>.bias`, consecutive in the registry.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return {weight_tensor_, weight_tensor_ + 2}; }

  // out() [rows, C] = LN(x [rows, C]).
  void forward(const half16* x, int rows, const WeightTable& weights_fp16);
  const half16* out() const { return out_.data(); }
  // d_residual [rows, C] += (add_to_residual false: =) the input gradient
  // from dy and the forward's input x; the weight's and bias's gradients
  // written or added (accumulate).
  void backward(const half16* dy, const half16* x, int rows, const WeightTable& weights_fp16,
                const GradTable& grads_fp16, bool accumulate, half16* d_residual, bool add_to_residual) const;

 private:
  Backend& backend_;
  int channels_;
  size_t weight_tensor_ = 0;
  Buffer<half16> out_;  // [max_rows, C]
  Buffer<float> mean_;  // [max_rows]
  Buffer<float> rstd_;  // [max_rows]
};

}  // namespace ddp
