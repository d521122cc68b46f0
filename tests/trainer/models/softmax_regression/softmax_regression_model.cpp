// softmax_regression_model.cpp
#include "softmax_regression_model.h"

#include "kernels/error.h"

namespace ddp::test {

ParameterRegistry softmax_regression_parameters(int64_t in, int64_t classes) {
  ParameterRegistry registry;
  register_linear_parameters(registry, "linear", in, classes, 0);
  return registry;
}

SoftmaxRegressionModel::SoftmaxRegressionModel(Backend& backend, int in, int classes, int max_batch)
    : backend_(backend),
      registry_(softmax_regression_parameters(in, classes)),
      linear_(in, classes),
      max_batch_(max_batch),
      logits_(backend, static_cast<size_t>(max_batch) * classes),
      logits_grad_(backend, static_cast<size_t>(max_batch) * classes) {
  DDP_REQUIRE(max_batch > 0, "SoftmaxRegressionModel: batch size must be positive");
  linear_.bind(registry_, "linear");
}

std::vector<size_t> SoftmaxRegressionModel::layer_tensors(int layer) const {
  DDP_REQUIRE(layer == 0, "SoftmaxRegressionModel::layer_tensors: it has one layer");
  return {linear_.weight_tensor(), linear_.bias_tensor()};
}

ModelOutput SoftmaxRegressionModel::forward(const DeviceBatch& batch, const WeightTable& weights_lowp) {
  DDP_REQUIRE(batch.rows > 0 && batch.rows <= max_batch_, "SoftmaxRegressionModel::forward: batch too large");
  DDP_REQUIRE(batch.features_lowp != nullptr, "SoftmaxRegressionModel::forward: it reads FP16 features");
  input_ = batch.features_lowp;
  rows_ = batch.rows;
  before_forward(0);
  linear_.forward(backend_, input_, rows_, weights_lowp, logits_.data(), Activation::None, nullptr);
  return ModelOutput{logits_.data(), rows_, linear_.out_features()};
}

void SoftmaxRegressionModel::backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                                      const GradientsReady& ready) {
  DDP_REQUIRE(input_ != nullptr, "SoftmaxRegressionModel::backward before forward");
  (void)weights_lowp;  // no input gradient: nothing is below the one layer
  before_backward(0);
  linear_.backward_weights(backend_, logits_grad_.data(), input_, rows_, grads_lowp, accumulate);
  if (ready) ready(linear_.weight_tensor(), linear_.bias_tensor() + 1);
}

}  // namespace ddp::test
