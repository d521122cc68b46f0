// loss_head.cpp: the loss of loss_head.h over any model's outputs.
#include "trainer/models/loss_head.h"

#include "kernels/ops/mse.h"
#include "kernels/ops/softmax_xent.h"

namespace ddp {

namespace {
// The classes among the outputs' columns (a padded vocabulary has fewer).
int classes_of(const ModelOutput& out) { return out.classes > 0 ? out.classes : out.width; }
}  // namespace

void loss_forward(Backend& backend, LossKind loss, const ModelOutput& out, const DeviceBatch& batch, float* loss_mean,
                  int32_t* correct_count) {
  if (loss == LossKind::SoftmaxCrossEntropy) {
    SoftmaxXentForward xent;
    xent.logits = out.values;
    xent.labels = batch.labels;
    xent.rows = out.rows;
    xent.cols = out.width;
    xent.real_cols = classes_of(out);
    xent.loss_mean = loss_mean;
    xent.correct_count = correct_count;
    softmax_xent_forward(backend, xent);
  } else {
    MseForward mse;
    mse.pred = out.values;
    mse.target = batch.targets_fp32;
    mse.rows = out.rows;
    mse.cols = out.width;
    mse.loss_mean = loss_mean;
    mse_forward(backend, mse);
  }
}

void loss_backward(Backend& backend, LossKind loss, const ModelOutput& out, const DeviceBatch& batch, ScalarArg scale,
                   lowp16* grad) {
  if (loss == LossKind::SoftmaxCrossEntropy) {
    SoftmaxXentBackward xent;
    xent.logits = out.values;
    xent.labels = batch.labels;
    xent.rows = out.rows;
    xent.cols = out.width;
    xent.real_cols = classes_of(out);
    xent.loss_scale = scale;
    xent.dlogits = grad;
    softmax_xent_backward(backend, xent);
  } else {
    MseBackward mse;
    mse.pred = out.values;
    mse.target = batch.targets_fp32;
    mse.rows = out.rows;
    mse.cols = out.width;
    mse.loss_scale = scale;
    mse.dpred = grad;
    mse_backward(backend, mse);
  }
}

}  // namespace ddp
