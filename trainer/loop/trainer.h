// trainer.h: the training loop. One Trainer per rank; every rank runs the
// same iterations in lock-step (the collectives order them), rank 0 alone
// prints, writes metrics and checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_watchdog.h"
#include "comm/communicator.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "trainer/data/batch_loader.h"
#include "trainer/loop/checkpoint_times.h"
#include "trainer/report/activation_bytes.h"
#include "trainer/data/data_source.h"
#include "trainer/config/train_config.h"
#include "trainer/checkpoint/train_state.h"
#include "trainer/report/memory_report.h"

namespace ddp {

// A failure every rank detects at the same step from state they share (the
// skip decision is global), e.g. --max-bad-steps: main prints it once and
// every rank exits with status 1 without MPI_Abort.
class AgreedError : public Error {
 public:
  using Error::Error;
};

struct TrainSummary {
  double test_loss = 0.0;
  double test_accuracy = 0.0;   // NaN for regression
  int64_t steps = 0;            // iterations done in this run (skipped ones included)
  int64_t final_step = 0;       // global iteration count at the end (continues across resumes)
  int64_t skipped_steps = 0;    // over the whole training, resumes included
  int64_t optimizer_steps = 0;  // optimizer steps taken in this process (skipped ones not counted): AdamW's t
  double samples_per_s = 0.0;   // global samples / wall time of this run's steps
  double wall_s = 0.0;
  double allreduce_ms_per_step = 0.0;      // mean over this run's steps (NaN with --cuda-graph: not timed)
  double allreduce_hidden_fraction = 0.0;  // of that time, the share behind backward (NaN likewise)
  int64_t graph_replays = 0;               // steps of this run replayed from a CUDA graph (--cuda-graph)
  CheckpointTimes checkpoints;             // what this run's checkpoints cost the loop, the last one's included
  int stop_signal = 0;  // SIGINT/SIGTERM/SIGUSR1 when a signal stopped the run early (checkpoint written), else 0
};

// What `--bench` measures: rank 0's wall time of each timed step (the
// device synchronised at its end) and the all-reduce time over them.
struct BenchTimings {
  std::vector<double> step_s;
  AllreduceTimes allreduce;   // over the timed steps
  int64_t graph_replays = 0;  // timed steps replayed from a CUDA graph: their all-reduces are not timed
  int64_t global_samples_per_step = 0;
  // Per rank, per timed step: the elements handed to all-reduces, to
  // reduce-scatters and to all-gathers (the calls' sizes, whole buffers).
  double allreduce_elements_per_step = 0, reduce_scatter_elements_per_step = 0, allgather_elements_per_step = 0;
  Precision precision = Precision::Fp16;  // --precision: the 16-bit elements above are FP16 or BF16
  // Bytes of a summed element (the all-reduces' and reduce-scatters'): 2,
  // or 4 with --grad-reduce-dtype fp32; the gathers' are always 2.
  size_t reduce_wire_bytes = 2;
  int zero_stage = 0;
  int zero_shard_size = 0;              // the ranks of a shard group (0, or the world: no hybrid sharding)
  size_t parameters = 0;                // the model's (Psi, no padding)
  size_t state_bytes_max = 0;           // the largest rank's state (memory_report.h)
  size_t peak_allocated_bytes_max = 0;  // the largest rank's allocation high-water mark (Backend::allocations)
  double state_formula_bytes = 0;       // the ZeRO formula with our extras (memory_report.h), per rank
  size_t device_used_bytes_max = 0;     // the largest rank's device memory in use after the steps (0: unknown)
  ActivationKinds activations;          // the model's, by kind (the same on every rank)
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, Backend& backend, Communicator& comm, TrainTestData data);
  ~Trainer();

  // Picks the starting state (resume, --init-weights, or fresh), validating
  // it; call before any output is written. Throws on a bad checkpoint.
  void prepare();
  // Stops early at a step boundary when a stop signal (trainer/loop/stop_signal.h)
  // reached any rank: writes a checkpoint and returns with stop_signal set.
  // Throws AgreedError after --max-bad-steps skipped steps in a row.
  TrainSummary run();
  // --eval-only: evaluates the weights prepare() loaded on the test set
  // (each rank its shard, sums all-reduced); trains nothing.
  TrainSummary evaluate();

  // Marks every blocking collective of prepare(), run() and bench() for the
  // watchdog (not owned; null: none). Call before prepare().
  void watch_collectives(CollectiveWatchdog* watchdog);

  // Throughput benchmark: warm-up steps, then timed steps, of the training
  // step alone (no evaluation, metrics or checkpoints).
  BenchTimings bench(int64_t warmup_steps, int64_t timed_steps);

  // The state as a checkpoint would hold it now. With --zero it is
  // gathered from every rank: a collective, every rank calls it.
  TrainState snapshot() const;
  // This rank's state by class (report/memory_report.h), as the banner's
  // memory line gives it.
  StateBytes state_bytes() const;
  // The FP16 weights forward reads (the flat layout, padding included): the
  // same bits on every rank after every step, at every --zero stage.
  std::vector<lowp16> weights_lowp() const;

  // Test hook: called with this rank's sample indices of each micro-batch
  // as the step loads it (empty function: none).
  void observe_batches(std::function<void(const uint32_t* indices, int rows)> observer);
  // What the training batch loader did so far (prefetch hits and misses).
  BatchLoaderCounts loader_counts() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
