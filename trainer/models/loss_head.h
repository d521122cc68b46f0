// loss_head.h: the loss over a model's outputs, shared by every model, in
// FP32 from the FP16 outputs (backend.h): softmax cross-entropy against the
// batch's int32 labels (one per output row: per sample for the MLP, per
// position for a language model) or MSE against its FP32 targets
// [rows, width]. The mean is over the output rows.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "trainer/data/batch_loader.h"
#include "trainer/models/loss_kind.h"
#include "trainer/models/model.h"

namespace ddp {

// The mean loss into *loss_mean (backend memory); for cross-entropy the
// count of rows whose argmax is the label into *correct_count, if not null.
void loss_forward(Backend& backend, LossKind loss, const ModelOutput& out, const DeviceBatch& batch, float* loss_mean,
                  int32_t* correct_count);

// The loss gradient times `scale` (the loss scale, and what the step folds
// into it) into grad [out.rows, out.width], FP16.
void loss_backward(Backend& backend, LossKind loss, const ModelOutput& out, const DeviceBatch& batch, ScalarArg scale,
                   lowp16* grad);

}  // namespace ddp
