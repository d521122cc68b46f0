// loss_kind.h: the loss a model's outputs are trained against (--loss
// xent | mse): read by the loss head, the MLP's data check and the evaluator.
#pragma once

namespace ddp {

enum class LossKind { SoftmaxCrossEntropy, MeanSquaredError };

}  // namespace ddp
