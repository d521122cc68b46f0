// mlp_model.cpp
#include "trainer/mlp_model.h"

#include "kernels/error.h"

namespace ddp {

MlpModel::MlpModel(Backend& backend, const ParameterLayout& layout, Activation activation, int max_batch)
    : backend_(backend), layout_(layout), activation_(activation), max_batch_(max_batch) {
  DDP_REQUIRE(max_batch > 0, "MlpModel: batch size must be positive");
  const size_t n = layout_.layers.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t count = static_cast<size_t>(max_batch) * layout_.layers[i].out_features;
    pre_activation_.emplace_back(backend, count);
    activation_out_.emplace_back(backend, i + 1 < n ? count : 0);
    grad_scratch_.emplace_back(backend, i + 1 < n ? count : 0);
  }
  output_grad_ = Buffer<half16>(backend, static_cast<size_t>(max_batch) * output_width());
}

const half16* MlpModel::forward(const half16* x, int rows, const half16* weights_fp16) {
  DDP_REQUIRE(rows > 0 && rows <= max_batch_, "MlpModel::forward: batch larger than allocated");
  input_ = x;
  const half16* in = x;
  const size_t n = layout_.layers.size();
  for (size_t i = 0; i < n; ++i) {
    const LinearSlices& s = layout_.layers[i];
    GemmFp16 g;  // Z[rows, out] = X[rows, in] * W[out, in]^T + b
    g.trans_b = Transpose::Yes;
    g.m = rows, g.n = s.out_features, g.k = s.in_features;
    g.a = in, g.lda = s.in_features;
    g.b = weights_fp16 + s.weight_offset, g.ldb = s.in_features;
    g.c = pre_activation_[i].data(), g.ldc = s.out_features;
    g.bias = weights_fp16 + s.bias_offset;
    backend_.gemm_fp16(g);
    if (i + 1 < n) {
      backend_.activation_forward_fp16(activation_, pre_activation_[i].data(), activation_out_[i].data(),
                                       static_cast<size_t>(rows) * s.out_features);
      in = activation_out_[i].data();
    }
  }
  return pre_activation_.back().data();
}

void MlpModel::backward(int rows, const half16* weights_fp16, half16* grads_fp16, bool accumulate,
                        const std::function<void(int layer)>& on_layer_done) {
  DDP_REQUIRE(input_ != nullptr, "MlpModel::backward before forward");
  const float beta = accumulate ? 1.0f : 0.0f;
  for (size_t i = layout_.layers.size(); i-- > 0;) {
    const LinearSlices& s = layout_.layers[i];
    const size_t count = static_cast<size_t>(rows) * s.out_features;
    half16* dz = (i + 1 == layout_.layers.size()) ? output_grad_.data() : grad_scratch_[i].data();
    if (i + 1 < layout_.layers.size())  // dZ_i = act'(Z_i) * dX_{i+1}, in place
      backend_.activation_backward_fp16(activation_, pre_activation_[i].data(), dz, dz, count);
    const half16* x_i = i == 0 ? input_ : activation_out_[i - 1].data();

    GemmFp16 dw;  // dW[out, in] = dZ[rows, out]^T * X[rows, in]
    dw.trans_a = Transpose::Yes;
    dw.m = s.out_features, dw.n = s.in_features, dw.k = rows;
    dw.a = dz, dw.lda = s.out_features;
    dw.b = x_i, dw.ldb = s.in_features;
    dw.beta = beta;
    dw.c = grads_fp16 + s.weight_offset, dw.ldc = s.in_features;
    backend_.gemm_fp16(dw);
    backend_.bias_grad_fp16(dz, rows, s.out_features, grads_fp16 + s.bias_offset, accumulate);
    if (on_layer_done) on_layer_done(static_cast<int>(i));

    if (i > 0) {  // dX_i[rows, in] = dZ[rows, out] * W[out, in]; the first layer needs no dX
      GemmFp16 dx;
      dx.m = rows, dx.n = s.in_features, dx.k = s.out_features;
      dx.a = dz, dx.lda = s.out_features;
      dx.b = weights_fp16 + s.weight_offset, dx.ldb = s.in_features;
      dx.c = grad_scratch_[i - 1].data(), dx.ldc = s.in_features;
      backend_.gemm_fp16(dx);
    }
  }
}

}  // namespace ddp
