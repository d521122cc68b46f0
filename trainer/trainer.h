// trainer.h: the training loop. One Trainer per rank; every rank runs the
// same iterations in lock-step (the collectives order them), rank 0 alone
// prints, writes metrics and checkpoints.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "trainer/data_source.h"
#include "trainer/train_config.h"
#include "trainer/train_state.h"

namespace ddp {

struct TrainSummary {
  double test_loss = 0.0;
  double test_accuracy = 0.0;  // NaN for regression
  int64_t steps = 0;           // iterations done in this run (skipped ones included)
  int64_t final_step = 0;      // global iteration count at the end (continues across resumes)
  int64_t skipped_steps = 0;   // over the whole training, resumes included
  double samples_per_s = 0.0;  // global samples / wall time of this run's steps
  double wall_s = 0.0;
  double allreduce_ms_per_step = 0.0;  // mean over this run's steps
  double allreduce_hidden_fraction = 0.0;  // of that time, the share behind backward
};

// What `--bench` measures: rank 0's wall time of each timed step (the
// device synchronised at its end) and the all-reduce time over them.
struct BenchTimings {
  std::vector<double> step_s;
  AllreduceTimes allreduce;  // over the timed steps
  int64_t global_samples_per_step = 0;
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, Backend& backend, Communicator& comm, TrainTestData data);
  ~Trainer();

  // Picks the starting state (resume, --init-weights, or fresh), validating
  // it; call before any output is written. Throws on a bad checkpoint.
  void prepare();
  TrainSummary run();

  // Throughput benchmark: warm-up steps, then timed steps, of the training
  // step alone (no evaluation, metrics or checkpoints).
  BenchTimings bench(int64_t warmup_steps, int64_t timed_steps);

  // The state as a checkpoint would hold it now.
  TrainState snapshot() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
