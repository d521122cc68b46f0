// mlp_model.cpp
#include "trainer/models/mlp/mlp_model.h"

#include "kernels/error.h"

namespace ddp {

MlpModel::MlpModel(Backend& backend, const MlpConfig& config, int max_batch)
    : backend_(backend),
      registry_(mlp_parameters(config.layer_widths)),
      activation_(config.activation),
      max_batch_(max_batch) {
  DDP_REQUIRE(max_batch > 0, "MlpModel: batch size must be positive");
  const std::vector<int64_t>& w = config.layer_widths;
  const size_t n = w.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    layers_.emplace_back(static_cast<int>(w[i]), static_cast<int>(w[i + 1]));
    layers_.back().bind(registry_, mlp_tensor_prefix(i));
    const size_t count = static_cast<size_t>(max_batch) * layers_[i].out_features();
    const bool hidden = i + 1 < n;
    // A hidden layer keeps Z only where the gradient needs it: relu'(Z) is
    // read from Y itself, so ReLU (and no activation) need no Z.
    pre_activation_.emplace_back(backend, !hidden || keeps_pre_activation() ? count : 0);
    activation_out_.emplace_back(backend, hidden ? count : 0);
    grad_scratch_.emplace_back(backend, hidden ? count : 0);
  }
  output_grad_ = Buffer<lowp16>(backend, static_cast<size_t>(max_batch) * output_width());
}

std::vector<size_t> MlpModel::layer_tensors(int layer) const {
  DDP_REQUIRE(layer >= 0 && layer < layer_count(), "MlpModel::layer_tensors: no such layer");
  const LinearLayer& l = layers_[static_cast<size_t>(layer)];
  return {l.weight_tensor(), l.bias_tensor()};
}

ModelOutput MlpModel::forward(const DeviceBatch& batch, const WeightTable& weights_lowp) {
  DDP_REQUIRE(batch.rows > 0 && batch.rows <= max_batch_, "MlpModel::forward: batch larger than allocated");
  DDP_REQUIRE(weights_lowp.size() == registry_.size(), "MlpModel::forward: the weight table is not the registry's");
  DDP_REQUIRE(batch.features_lowp != nullptr, "MlpModel::forward: the MLP reads FP16 features");
  input_ = batch.features_lowp;
  rows_ = batch.rows;
  const lowp16* in = input_;
  const size_t n = layers_.size();
  for (size_t i = 0; i < n; ++i) {
    before_forward(static_cast<int>(i));
    if (i + 1 < n) {  // hidden: act(X W^T + b), Z kept for GELU
      layers_[i].forward(backend_, in, rows_, weights_lowp, activation_out_[i].data(), activation_,
                         keeps_pre_activation() ? pre_activation_[i].data() : nullptr);
      in = activation_out_[i].data();
    } else {  // the logits: no activation
      layers_[i].forward(backend_, in, rows_, weights_lowp, pre_activation_[i].data(), Activation::None, nullptr);
    }
  }
  return ModelOutput{pre_activation_.back().data(), rows_, output_width()};
}

void MlpModel::backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                        const GradientsReady& ready) {
  DDP_REQUIRE(input_ != nullptr, "MlpModel::backward before forward");
  DDP_REQUIRE(weights_lowp.size() == registry_.size() && grads_lowp.size() == registry_.size(),
              "MlpModel::backward: a table is not the registry's");
  for (size_t i = layers_.size(); i-- > 0;) {
    before_backward(static_cast<int>(i));
    const LinearLayer& layer = layers_[i];
    // dZ_i: the loss gradient for the last layer; for a hidden layer, the dX
    // GEMM of layer i + 1 wrote it with act'(Z_i) already applied.
    const lowp16* dz = (i + 1 == layers_.size()) ? output_grad_.data() : grad_scratch_[i].data();
    const lowp16* x_i = i == 0 ? input_ : activation_out_[i - 1].data();
    layer.backward_weights(backend_, dz, x_i, rows_, grads_lowp, accumulate);
    // The weight then the bias: consecutive in the registry (mlp_config.h).
    if (ready) ready(layer.weight_tensor(), layer.bias_tensor() + 1);
    if (i > 0) {  // dZ_{i-1} = act'(Z_{i-1}) * (dZ W): relu' from Y_{i-1}, GELU's from Z_{i-1}
      const lowp16* dact_input = keeps_pre_activation() ? pre_activation_[i - 1].data() : activation_out_[i - 1].data();
      layer.backward_input(backend_, dz, rows_, weights_lowp, grad_scratch_[i - 1].data(), activation_, dact_input);
    }
  }
}

ActivationKinds MlpModel::activation_kinds() const {
  double hidden = 0;
  for (size_t i = 0; i + 1 < layers_.size(); ++i) hidden += layers_[i].out_features();
  const double b = max_batch_, out = output_width(), fp16 = sizeof(lowp16);
  ActivationKind kept{"layers", 0, fp16 * b * (hidden + out + (keeps_pre_activation() ? hidden : 0.0)),
                      keeps_pre_activation() ? "2B(2 sum h + o)" : "2B(sum h + o)"};
  ActivationKind grads{"gradients", output_grad_.size_bytes(), fp16 * b * (hidden + out), "2B(sum h + o)"};
  for (size_t i = 0; i < layers_.size(); ++i) {
    kept.bytes += pre_activation_[i].size_bytes() + activation_out_[i].size_bytes();
    grads.bytes += grad_scratch_[i].size_bytes();
  }
  return {kept, grads};
}

}  // namespace ddp
