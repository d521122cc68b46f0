// linear_layer.cpp
#include "trainer/models/linear_layer.h"

#include "kernels/error.h"

namespace ddp {

void LinearLayer::bind(const ParameterRegistry& registry, const std::string& prefix) {
  weight_tensor_ = registry.find(prefix + ".weight");
  bias_tensor_ = registry.find(prefix + ".bias");
  DDP_REQUIRE(weight_tensor_ < registry.size() && bias_tensor_ < registry.size(), "LinearLayer: tensors not registered");
  DDP_REQUIRE(registry[weight_tensor_].count == static_cast<size_t>(in_) * out_ &&
                  registry[bias_tensor_].count == static_cast<size_t>(out_),
              "LinearLayer: registered shapes do not match");
}

void LinearLayer::forward(Backend& backend, const half16* x, int rows, const WeightTable& weights_fp16, half16* y,
                          Activation act, half16* pre_activation) const {
  GemmFp16 g;  // Y[rows, out] = act(X[rows, in] * W[out, in]^T + b), one GEMM with its epilogue
  g.trans_b = Transpose::Yes;
  g.m = rows, g.n = out_, g.k = in_;
  g.a = x, g.lda = in_;
  g.b = weights_fp16.at(weight_tensor_), g.ldb = in_;
  g.bias = weights_fp16.at(bias_tensor_);
  g.c = y, g.ldc = out_;
  g.act = act;
  if (pre_activation) g.pre_activation = pre_activation, g.ld_pre_activation = out_;
  backend.gemm_fp16(g);
}

void LinearLayer::backward_weights(Backend& backend, const half16* dz, const half16* x, int rows,
                                   const GradTable& grads_fp16, bool accumulate) const {
  GemmFp16 dw;  // dW[out, in] = dZ[rows, out]^T * X[rows, in]; db = sum_rows dZ from the same read of dZ
  dw.trans_a = Transpose::Yes;
  dw.m = out_, dw.n = in_, dw.k = rows;
  dw.a = dz, dw.lda = out_;
  dw.b = x, dw.ldb = in_;
  dw.beta = accumulate ? 1.0f : 0.0f;
  dw.c = grads_fp16.at(weight_tensor_), dw.ldc = in_;
  dw.bias_grad = grads_fp16.at(bias_tensor_);
  dw.bias_grad_accumulate = accumulate;
  backend.gemm_fp16(dw);
}

void LinearLayer::backward_input(Backend& backend, const half16* dz, int rows, const WeightTable& weights_fp16,
                                 half16* dx, Activation dact, const half16* dact_input) const {
  GemmFp16 g;  // dX[rows, in] = dact'(.) * (dZ[rows, out] * W[out, in])
  g.m = rows, g.n = in_, g.k = out_;
  g.a = dz, g.lda = out_;
  g.b = weights_fp16.at(weight_tensor_), g.ldb = in_;
  g.c = dx, g.ldc = in_;
  g.dact = dact;
  g.dact_input = dact_input;
  g.ld_dact_input = in_;
  backend.gemm_fp16(g);
}

}  // namespace ddp
