// softmax_regression_model.h: a test-only third model, added to show what a
// new model touches (issue 28): multinomial logistic regression, one
// nn.Linear(in, classes) whose logits the shared loss head (loss_head.h)
// turns into softmax cross-entropy. Its files are this folder; it enters
// the program through one row of the model table (register_softmax_regression,
// softmax_regression_spec.h), nothing else.
#pragma once

#include <vector>

#include "kernels/buffer.h"
#include "trainer/models/layers/linear_layer.h"
#include "trainer/models/model.h"

namespace ddp::test {

// "linear.weight" [classes, in], "linear.bias" [classes], drawn first (init
// order 0) with nn.Linear's initialisation.
ParameterRegistry softmax_regression_parameters(int64_t in, int64_t classes);

class SoftmaxRegressionModel final : public Model {
 public:
  SoftmaxRegressionModel(Backend& backend, int in, int classes, int max_batch);

  const ParameterRegistry& parameters() const override { return registry_; }
  int max_batch() const override { return max_batch_; }
  int layer_count() const override { return 1; }
  std::vector<size_t> layer_tensors(int layer) const override;

  // batch.features_lowp [rows, in] -> logits [rows, classes].
  ModelOutput forward(const DeviceBatch& batch, const WeightTable& weights_lowp) override;
  lowp16* output_grad() override { return logits_grad_.data(); }
  void backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                const GradientsReady& ready) override;

 private:
  Backend& backend_;
  ParameterRegistry registry_;
  LinearLayer linear_;
  int max_batch_;
  const lowp16* input_ = nullptr;  // X of the last forward [rows, in]
  int rows_ = 0;
  Buffer<lowp16> logits_;       // [max_batch, classes]
  Buffer<lowp16> logits_grad_;  // [max_batch, classes], the loss head's dL/dlogits
};

}  // namespace ddp::test
