// training_run_support.h: one single-process training run of a config on a
// backend, and what the step-state and optimizer tests compare of it.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "trainer/loop/trainer.h"

namespace ddp::test {

struct TrainingRun {
  std::vector<float> master;  // the snapshot's master weights (packed)
  TrainSummary summary;
  TrainState state;
  StateBytes held;  // the run's memory by class at its end (report/memory_report.h)
};

inline TrainingRun train_with(Backend& backend, const TrainConfig& c) {
  SingleProcessCommunicator comm;
  Trainer t(c, backend, comm, load_train_test(c.data, c.seed));
  t.prepare();
  TrainingRun r;
  r.summary = t.run();
  r.state = t.snapshot();
  r.master = r.state.master_weights_fp32;
  r.held = t.state_bytes();
  return r;
}

}  // namespace ddp::test
