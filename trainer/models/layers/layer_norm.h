// layer_norm.h: nn.LayerNorm over the last dimension (weight and bias [C],
// eps kLayerNormEps, transformer_math.h) on a Backend: FP32 statistics from
// FP16 input, one rounding per output. Backward reads its output (the next
// GEMM's input) and the rows' mean and rstd: kept in its own buffers
// (--recompute none, ln_f at every level), or in buffers shared by every
// block's LayerNorms (light, block), which a recomputing block refills by
// running forward again on the same input (the same bits).
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/tensor_range.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

// What a LayerNorm's backward reads of its forward.
struct LayerNormActivations {
  LayerNormActivations(Backend& backend, int channels, size_t max_rows);
  size_t size_bytes() const { return out.size_bytes() + mean.size_bytes() + rstd.size_bytes(); }
  Buffer<lowp16> out;  // [max_rows, C]
  Buffer<float> mean;  // [max_rows]
  Buffer<float> rstd;  // [max_rows]
};

class LayerNorm {
 public:
  // shared: where forward writes (null: buffers of its own).
  LayerNorm(Backend& backend, int channels, size_t max_rows, LayerNormActivations* shared = nullptr);

  // `<prefix>.weight` then `<prefix>.bias`, consecutive in the registry.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return {weight_tensor_, weight_tensor_ + 2}; }

  // out() [rows, C] = LN(x [rows, C]).
  void forward(const lowp16* x, int rows, const WeightTable& weights_lowp);
  const lowp16* out() const { return kept_->out.data(); }
  // d_residual [rows, C] += (add_to_residual false: =) the input gradient
  // from dy and the forward's input x; the weight's and bias's gradients
  // written or added (accumulate). Reads the last forward's statistics.
  void backward(const lowp16* dy, const lowp16* x, int rows, const WeightTable& weights_lowp,
                const GradTable& grads_lowp, bool accumulate, lowp16* d_residual, bool add_to_residual) const;
  // The bytes of its own buffers (0 when shared).
  size_t owned_bytes() const { return owned_ ? owned_->size_bytes() : 0; }

 private:
  Backend& backend_;
  int channels_;
  size_t weight_tensor_ = 0;
  std::unique_ptr<LayerNormActivations> owned_;  // null when shared (on the heap: a moved layer keeps kept_ valid)
  LayerNormActivations* kept_ = nullptr;         // owned_ or the shared buffers
};

}  // namespace ddp
