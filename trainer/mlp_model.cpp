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
    const bool hidden = i + 1 < n;
    // A hidden layer keeps Z only where the gradient needs it: relu'(Z) is
    // read from Y itself, so ReLU (and no activation) need no Z.
    pre_activation_.emplace_back(backend, !hidden || keeps_pre_activation() ? count : 0);
    activation_out_.emplace_back(backend, hidden ? count : 0);
    grad_scratch_.emplace_back(backend, hidden ? count : 0);
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
    const bool hidden = i + 1 < n;
    GemmFp16 g;  // Y[rows, out] = act(X[rows, in] * W[out, in]^T + b), one GEMM with its epilogue
    g.trans_b = Transpose::Yes;
    g.m = rows, g.n = s.out_features, g.k = s.in_features;
    g.a = in, g.lda = s.in_features;
    g.b = weights_fp16 + s.weight_offset, g.ldb = s.in_features;
    g.bias = weights_fp16 + s.bias_offset;
    if (hidden) {
      g.c = activation_out_[i].data(), g.ldc = s.out_features;
      g.act = activation_;
      if (keeps_pre_activation()) g.pre_activation = pre_activation_[i].data(), g.ld_pre_activation = s.out_features;
      in = activation_out_[i].data();
    } else {  // the logits: no activation
      g.c = pre_activation_[i].data(), g.ldc = s.out_features;
    }
    backend_.gemm_fp16(g);
  }
  return pre_activation_.back().data();
}

void MlpModel::backward(int rows, const half16* weights_fp16, half16* grads_fp16, bool accumulate,
                        const std::function<void(int layer)>& on_layer_done) {
  DDP_REQUIRE(input_ != nullptr, "MlpModel::backward before forward");
  const float beta = accumulate ? 1.0f : 0.0f;
  for (size_t i = layout_.layers.size(); i-- > 0;) {
    const LinearSlices& s = layout_.layers[i];
    // dZ_i: the loss gradient for the last layer; for a hidden layer, the dX
    // GEMM of layer i + 1 wrote it with act'(Z_i) already applied.
    const half16* dz = (i + 1 == layout_.layers.size()) ? output_grad_.data() : grad_scratch_[i].data();
    const half16* x_i = i == 0 ? input_ : activation_out_[i - 1].data();

    GemmFp16 dw;  // dW[out, in] = dZ[rows, out]^T * X[rows, in]; db = sum_rows dZ from the same read of dZ
    dw.trans_a = Transpose::Yes;
    dw.m = s.out_features, dw.n = s.in_features, dw.k = rows;
    dw.a = dz, dw.lda = s.out_features;
    dw.b = x_i, dw.ldb = s.in_features;
    dw.beta = beta;
    dw.c = grads_fp16 + s.weight_offset, dw.ldc = s.in_features;
    dw.bias_grad = grads_fp16 + s.bias_offset;
    dw.bias_grad_accumulate = accumulate;
    backend_.gemm_fp16(dw);
    if (on_layer_done) on_layer_done(static_cast<int>(i));

    if (i > 0) {  // dZ_{i-1}[rows, in] = act'(Z_{i-1}) * (dZ[rows, out] * W[out, in]); the first layer needs no dX
      GemmFp16 dx;
      dx.m = rows, dx.n = s.in_features, dx.k = s.out_features;
      dx.a = dz, dx.lda = s.out_features;
      dx.b = weights_fp16 + s.weight_offset, dx.ldb = s.in_features;
      dx.c = grad_scratch_[i - 1].data(), dx.ldc = s.in_features;
      dx.dact = activation_;
      // relu' from Y_{i-1} (see backend.h); GELU's from Z_{i-1}.
      dx.dact_input = keeps_pre_activation() ? pre_activation_[i - 1].data() : activation_out_[i - 1].data();
      dx.ld_dact_input = s.in_features;
      backend_.gemm_fp16(dx);
    }
  }
}

}  // namespace ddp
