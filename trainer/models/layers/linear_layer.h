// linear_layer.h: one nn.Linear (weight [out, in], bias [out]) over the
// caller's parameter buffers (reached through tensor_table.h), with the
// activation that follows it fused into its GEMMs' epilogues (backend.h),
// so a Linear + activation pair costs one GEMM forward and two backward and
// no element-wise pass:
//   forward         Y = act(X W^T + b)   (one rounding; Z = X W^T + b kept
//                                         when the activation's gradient needs it)
//   weight gradient dW = dZ^T X, db = sum_rows dZ   (one read of dZ)
//   input gradient  dX = dact(dZ W)      (dact: the gradient of the activation
//                                         before this layer, applied in the
//                                         same epilogue)
// Reused by every model that has Linear layers.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/elementwise_math.h"
#include "trainer/models/layers/tensor_range.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

class LinearLayer {
 public:
  LinearLayer(int in_features, int out_features) : in_(in_features), out_(out_features) {}

  int in_features() const { return in_; }
  int out_features() const { return out_; }

  // Takes the indices of the tensors register_linear_parameters
  // (parameter_registry.h) registered under `prefix`. Each call below
  // resolves them through the tables when it runs, never before.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  size_t weight_tensor() const { return weight_tensor_; }
  size_t bias_tensor() const { return bias_tensor_; }
  // The weight then the bias (bind() requires them consecutive).
  TensorRange tensors() const { return {weight_tensor_, bias_tensor_ + 1}; }

  // y [rows, out] = act(x [rows, in] W^T + b); pre_activation [rows, out]
  // receives Z when not null.
  void forward(Backend& backend, const lowp16* x, int rows, const WeightTable& weights_lowp, lowp16* y, Activation act,
               lowp16* pre_activation) const;
  // dW (written, or added to when accumulate) and db from dz [rows, out]
  // and this layer's input x [rows, in].
  void backward_weights(Backend& backend, const lowp16* dz, const lowp16* x, int rows, const GradTable& grads_lowp,
                        bool accumulate) const;
  // dx [rows, in] = dact'(dact_input) * (dz W); dact_input [rows, in] as
  // GemmLowp::dact_input (Z, or for ReLU its output).
  void backward_input(Backend& backend, const lowp16* dz, int rows, const WeightTable& weights_lowp, lowp16* dx,
                      Activation dact, const lowp16* dact_input) const;

 private:
  int in_;
  int out_;
  size_t weight_tensor_ = 0;
  size_t bias_tensor_ = 0;
};

}  // namespace ddp
