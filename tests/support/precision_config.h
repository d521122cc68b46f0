// precision_config.h: a test's TrainConfig in a given working precision,
// as the command line makes it (--precision bf16 implies --loss-scale
// none), for the trainer-level suites that run for FP16 and BF16.
#pragma once

#include "trainer/config/train_config.h"

namespace ddp::test {

inline TrainConfig in_precision(TrainConfig c, Precision p) {
  c.precision = p;
  if (p == Precision::Bf16) c.loss_scaler.mode = LossScaleMode::None;
  return c;
}

}  // namespace ddp::test
