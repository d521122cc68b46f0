// linear_layer.cpp: nn.Linear's three GEMMs (linear_layer.h).
#include "trainer/models/layers/linear_layer.h"

#include "kernels/error.h"
#include "trainer/models/layers/gemm_calls.h"

namespace ddp {

void LinearLayer::bind(const ParameterRegistry& registry, const std::string& prefix) {
  weight_tensor_ = registry.find(prefix + ".weight");
  bias_tensor_ = registry.find(prefix + ".bias");
  DDP_REQUIRE(weight_tensor_ < registry.size() && bias_tensor_ < registry.size(),
              "LinearLayer: tensors not registered");
  DDP_REQUIRE(registry[weight_tensor_].count == static_cast<size_t>(in_) * out_ &&
                  registry[bias_tensor_].count == static_cast<size_t>(out_),
              "LinearLayer: registered shapes do not match");
  DDP_REQUIRE(bias_tensor_ == weight_tensor_ + 1, "LinearLayer: the weight and the bias are not consecutive");
}

void LinearLayer::forward(Backend& backend, const lowp16* x, int rows, const WeightTable& weights_lowp, lowp16* y,
                          Activation act, lowp16* pre_activation) const {
  // Y[rows, out] = act(X[rows, in] W[out, in]^T + b), one GEMM with its epilogue
  GemmLowp g = gemm_nt(rows, out_, in_, x, in_, weights_lowp.at(weight_tensor_), in_, y, out_);
  g.bias = weights_lowp.at(bias_tensor_);
  g.act = act;
  if (pre_activation) {
    g.pre_activation = pre_activation;
    g.ld_pre_activation = out_;
  }
  gemm_lowp(backend, g);
}

void LinearLayer::backward_weights(Backend& backend, const lowp16* dz, const lowp16* x, int rows,
                                   const GradTable& grads_lowp, bool accumulate) const {
  // dW[out, in] = dZ[rows, out]^T X[rows, in]; db = sum_rows dZ from the same read of dZ
  GemmLowp dw = gemm_tn(out_, in_, rows, dz, out_, x, in_, grads_lowp.at(weight_tensor_), in_);
  dw.beta = accumulate ? 1.0f : 0.0f;
  dw.bias_grad = grads_lowp.at(bias_tensor_);
  dw.bias_grad_accumulate = accumulate;
  gemm_lowp(backend, dw);
}

void LinearLayer::backward_input(Backend& backend, const lowp16* dz, int rows, const WeightTable& weights_lowp,
                                 lowp16* dx, Activation dact, const lowp16* dact_input) const {
  // dX[rows, in] = dact'(.) * (dZ[rows, out] W[out, in])
  GemmLowp g = gemm_nn(rows, in_, out_, dz, out_, weights_lowp.at(weight_tensor_), in_, dx, in_);
  g.dact = dact;
  g.dact_input = dact_input;
  g.ld_dact_input = in_;
  gemm_lowp(backend, g);
}

}  // namespace ddp
