// loss_ops.h: the loss family of the Backend (backend.h): FP32 losses
// from FP16 predictions, and their scaled FP16 gradients.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/step_status.h"

namespace ddp {

// Implemented by each backend (CPU: cpu_backend.cpp; CUDA: cuda_loss.h).
class LossOps {
 public:
  virtual ~LossOps() = default;

  // Cross-entropy over rows of logits [rows, cols] whose first real_cols
  // columns are the classes (real_cols == cols: all; the GPT's vocabulary
  // is padded to a multiple of 64 for the GEMMs, as llm.c):
  // *loss_mean = mean_r [logsumexp(logits[r, :real_cols]) - logits[r, labels[r]]];
  // *correct_count (if not null) = #rows whose argmax over the classes
  // equals the label (first maximum wins, as torch.argmax). Padded columns
  // never win the argmax and get no probability. A label outside
  // [0, real_cols) makes its row's loss (hence the mean) NaN.
  virtual void softmax_xent_forward(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                                    float* loss_mean, int32_t* correct_count) = 0;
  // dlogits = fp16(loss_scale * (softmax(logits) - onehot(labels)) / rows)
  // over the classes, exactly 0 in padded columns (loss_scale: a value, or
  // ScalarArg::at a float in this backend's memory); a label outside the
  // classes makes its gradient row NaN.
  virtual void softmax_xent_backward(const lowp16* logits, const int32_t* labels, int rows, int cols, int real_cols,
                                     ScalarArg loss_scale, lowp16* dlogits) = 0;
  // The chunked classifier's step (trainer/models/layers/tied_classifier.h):
  // for the rows [0, rows) of a chunk of a batch of total_rows rows, each
  // row's loss into row_loss[r] (as softmax_xent_forward computes it) and
  // the logits overwritten in place by their gradient (as
  // softmax_xent_backward for total_rows rows: coef = loss_scale /
  // total_rows). Each row gets the bits the two unfused calls give it, from
  // one read of its logits.
  virtual void softmax_xent_fused_rows(lowp16* logits_to_grad, const int32_t* labels, int rows, int cols, int real_cols,
                                       int total_rows, ScalarArg loss_scale, float* row_loss) = 0;
  // *loss_mean = the mean of row_loss [rows], summed in the order and
  // precision softmax_xent_forward sums its rows (so the chunked loss is its
  // bits).
  virtual void loss_rows_mean(const float* row_loss, int rows, float* loss_mean) = 0;
  // *loss_mean = mean over rows*cols of (pred - target)^2 (torch MSELoss 'mean').
  virtual void mse_forward(const lowp16* pred, const float* target, int rows, int cols, float* loss_mean) = 0;
  // dpred = fp16(loss_scale * 2 * (pred - target) / (rows * cols))
  virtual void mse_backward(const lowp16* pred, const float* target, int rows, int cols, ScalarArg loss_scale,
                            lowp16* dpred) = 0;
};

}  // namespace ddp
