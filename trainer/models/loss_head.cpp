// loss_head.cpp: the loss of loss_head.h over any model's outputs.
#include "trainer/models/loss_head.h"

namespace ddp {

namespace {
// The classes among the outputs' columns (a padded vocabulary has fewer).
int classes_of(const ModelOutput& out) { return out.classes > 0 ? out.classes : out.width; }
}  // namespace

void loss_forward(Backend& backend, LossKind loss, const ModelOutput& out, const DeviceBatch& batch, float* loss_mean,
                  int32_t* correct_count) {
  if (loss == LossKind::SoftmaxCrossEntropy)
    backend.softmax_xent_forward(out.values, batch.labels, out.rows, out.width, classes_of(out), loss_mean,
                                 correct_count);
  else
    backend.mse_forward(out.values, batch.targets_fp32, out.rows, out.width, loss_mean);
}

void loss_backward(Backend& backend, LossKind loss, const ModelOutput& out, const DeviceBatch& batch, ScalarArg scale,
                   lowp16* grad) {
  if (loss == LossKind::SoftmaxCrossEntropy)
    backend.softmax_xent_backward(out.values, batch.labels, out.rows, out.width, classes_of(out), scale, grad);
  else
    backend.mse_backward(out.values, batch.targets_fp32, out.rows, out.width, scale, grad);
}

}  // namespace ddp
