// checkpointing.h: the trainer's side of checkpoints. Which checkpoint a
// --resume starts from, restoring the trainer's parts from it, the state a
// checkpoint holds now and writing it (rank 0; with --async-checkpoint on a
// background thread), what the checkpoints cost the loop, the run's lineage
// (run id), and the outputs checked and opened before the first step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "trainer/checkpoint/async_checkpoint_writer.h"
#include "trainer/checkpoint/run_lock.h"
#include "trainer/data/dataset.h"
#include "trainer/loop/checkpoint_times.h"
#include "trainer/loop/epoch_cursor.h"
#include "trainer/loop/fault_hooks.h"
#include "trainer/io/json_writer.h"
#include "trainer/params/parameter_store.h"
#include "trainer/report/progress_reporter.h"
#include "trainer/checkpoint/resume_check.h"
#include "trainer/loop/step_state_view.h"
#include "trainer/config/train_config.h"
#include "trainer/checkpoint/train_state.h"

namespace ddp {

// The optimizer's settings as a checkpoint records them (flag name without
// "--" -> value, shortest round-trip text): lr, weight-decay, and momentum,
// nesterov (SGD) or beta1, beta2, eps (AdamW).
std::map<std::string, std::string> optimizer_settings(const TrainConfig& config);

class Checkpointing {
 public:
  // The parts a checkpoint is made of and restored into (all outlive this).
  Checkpointing(const TrainConfig& cfg, const Dataset& train, ParameterStore& params, StepStateView& state,
                EpochCursor& cursor, Communicator& comm, ProgressReporter& progress, const RunPlan& plan);

  // The checkpoint a --resume starts from: the PATH given, or the newest
  // valid one in --checkpoint-dir; "" (said why) to start from scratch.
  std::string resolve_resume_path();
  // Validates `s` (read from `path`) against this run and restores it into
  // the parts; returns the checkpoint's step.
  int64_t restore(const TrainState& s, const std::string& path);
  // --eval-only: the checkpoint's weights alone (its contents and model
  // checked; position, data and scaler are not this run's business).
  // Returns the checkpoint's step.
  int64_t restore_weights(const TrainState& s, const std::string& path);
  bool resumed() const { return resumed_; }  // the state came from a checkpoint

  // Lineage (train_state.h): the checkpoint's, or drawn fresh when there is
  // none (a run from scratch, or a checkpoint of an earlier build that
  // recorded none). The address is for the broadcast of rank 0's.
  void ensure_run_id();

  // Rank 0 alone writes: every output is checked, created or opened here,
  // before the first step (run_outputs.h), and the metrics file is opened.
  std::unique_ptr<MetricsFile> prepare_outputs(int64_t step);

  // The state as a checkpoint would hold it at `step` (reads the step state).
  TrainState snapshot(int64_t step);
  std::string path_at(int64_t step) const;
  // The checkpoint of `step`, once (no --checkpoint-dir: nothing). Every
  // rank downloads the state; rank 0 writes it and prunes older ones, at
  // once, or with --async-checkpoint on the writer thread after waiting for
  // the previous write (whose error is thrown here).
  void write(int64_t step);
  // --async-checkpoint, rank 0: collects a background write that has
  // finished (its time; its error is thrown here), without waiting. Called
  // at every step boundary, so a failed write stops the run at the next one.
  void poll_write();
  // --async-checkpoint, rank 0: waits for the write in flight (its error is
  // thrown here): at the end of a run, and before a stop says its
  // checkpoint is written. Elsewhere nothing.
  void wait_for_write();
  // What checkpoints cost since the last call (a step record's interval),
  // and over this run.
  CheckpointTimes take_interval_times();
  const CheckpointTimes& run_times() const { return run_times_; }

  static uint64_t fresh_run_id();

 private:
  // The checkpoint's contents, and its model against this run's.
  void check_model_of(const TrainState& s, const std::string& path) const;
  // A line per optimizer setting this run changes (the run's flags win, as
  // with PyTorch when the new value is set after load_state_dict).
  std::vector<std::string> optimizer_setting_notes(const TrainState& s) const;
  // A whole flat state from the checkpoint into one of the store's FP32
  // buffers (its owned range; the masters also re-cast to FP16).
  void load_state(std::vector<float> flat, Buffer<float>& state);
  // What resume_check.h needs to know about this run.
  ResumeTarget resume_target() const;
  int world() const { return comm_.world_size(); }
  int64_t global_batch() const { return cursor_.samples_per_rank_step() * world(); }
  void say(const std::string& line) { progress_.permanent(line); }
  // Adds to this interval's and this run's times.
  void count(const CheckpointTimes& times);
  // A finished background write's time.
  void count_write(const std::optional<AsyncCheckpointWriter::Finished>& finished);

  const TrainConfig& cfg_;
  const Dataset& train_;
  ParameterStore& params_;
  StepStateView& state_;
  EpochCursor& cursor_;
  Communicator& comm_;
  ProgressReporter& progress_;
  const RunPlan& plan_;
  // The data order's seed: --seed, or a resumed checkpoint's (its order
  // continues); what a checkpoint records.
  uint64_t data_seed_;
  bool resumed_ = false;
  uint64_t run_id_ = 0;
  int64_t last_checkpoint_step_ = -1;
  const CheckpointWriteFault write_fault_;  // the environment's test hook (fault_hooks.h)
  CheckpointTimes interval_times_, run_times_;
  bool grace_noted_ = false;  // stop_grace.h's note, printed once a run
  // Rank 0's hold on --checkpoint-dir (prepare_outputs to the end); released
  // after the writer_ below has finished its last write.
  RunLock run_lock_;
  // Last: destroyed first, so a write in flight ends before the parts above go.
  AsyncCheckpointWriter writer_;
};

}  // namespace ddp
