// run_report.h: what a run tells the person and the metrics file (rank 0;
// other ranks' reporter prints nothing and they open no metrics file): the
// banner, the log-step line and record, the evaluation line and record, and
// the lines and records a run ends with (finished, or stopped by a signal).
// Also this run's step counts and timings that those figures come from.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "trainer/data/dataset.h"
#include "trainer/loop/checkpoint_times.h"
#include "trainer/loop/epoch_cursor.h"
#include "trainer/loop/evaluator.h"
#include "trainer/io/json_writer.h"
#include "trainer/report/activation_bytes.h"
#include "trainer/report/memory_report.h"
#include "trainer/report/progress_reporter.h"
#include "trainer/config/train_config.h"
#include "trainer/loop/trainer.h"

namespace ddp {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// This run's counts and timings (a resumed run's start afresh).
struct RunTally {
  Clock::time_point run_start = Clock::now();
  double train_s = 0.0;                             // the steps' wall time, their status reads included
  int64_t steps = 0, samples = 0;                   // iterations and global samples of this run
  Clock::time_point interval_start = Clock::now();  // since the last log step
  int64_t interval_samples = 0, interval_steps = 0;
  AllreduceTimes allreduce;  // this run's, summed at log steps

  void count_step(int64_t global_rows, double step_s) {
    ++steps;
    samples += global_rows;
    interval_samples += global_rows;
    ++interval_steps;
    train_s += step_s;
  }
  double interval_samples_per_s() const { return interval_samples / std::max(seconds_since(interval_start), 1e-9); }
  double samples_per_s() const { return samples / std::max(train_s, 1e-9); }
  void start_interval() {
    interval_start = Clock::now();
    interval_samples = 0;
    interval_steps = 0;
  }
};

class RunReport {
 public:
  // Rank 0's reporter prints; the others' are silent.
  RunReport(const TrainConfig& cfg, const Communicator& comm);

  // The terminal's lines: the permanent ones and rank 0's live line (the
  // step and the checkpoints print through it too).
  ProgressReporter& progress() { return progress_; }

  // The metrics file (null: none), opened once the outputs are checked.
  void set_metrics(std::unique_ptr<MetricsFile> metrics) { metrics_ = std::move(metrics); }
  void say(const std::string& line) { progress_.permanent(line); }

  void banner(size_t parameters, const Dataset& train, const Dataset& test, const RunPlan& plan);
  // After the banner: this rank's memory by state class against the ZeRO
  // formula (memory_report.h), a line and an "event": "memory" record; then
  // the model's activations by kind (activation_report.h), a line and the
  // same record's activation_* fields.
  void memory(const StateBytes& state, size_t other_bytes, const ZeroFormula& formula,
              const ActivationKinds& activations);
  // A --log-every step: `snap` filled in (loss over the ranks, interval
  // figures; NaN all-reduce figures with --cuda-graph), and with a
  // --checkpoint-dir what checkpoints cost the loop in the interval.
  void log_step(const ProgressSnapshot& snap, double lr, double grad_norm, double allreduce_hidden_fraction,
                const CheckpointTimes& checkpoints);
  void eval(const EvalResult& result, int64_t step, int64_t epoch_1based, int64_t epochs_total);
  // --eval-only: "eval-only (step S): test loss ..." and an "eval" record with "eval_only": true.
  void eval_only(const EvalResult& result, int64_t step);
  // A finished run: the "done:" line and the summary record.
  void summary(const TrainSummary& sum, double final_loss_scale, bool graph_mode);
  // A run stopped by `signal` at `step`: its line, then (after the summary
  // figures are taken) its record. `checkpoint`: the path written, or "".
  void stopped_line(int signal, int64_t step, const std::string& checkpoint);
  void stopped_record(int signal, int64_t step, const TrainSummary& sum, const std::string& checkpoint);
  // A signal that came while the finished run was writing its results.
  void finished_despite_signal(int signal, int64_t step, const std::string& checkpoint);

 private:
  std::string eval_figures(const EvalResult& result) const;  // "test loss 0.4321, test accuracy 88.1% (...)"
  // With a --checkpoint-dir: checkpoint_blocked_s, and with
  // --async-checkpoint checkpoint_wait_s and checkpoint_write_s.
  void add_checkpoint_fields(JsonRecord& r, const CheckpointTimes& times) const;
  int world() const { return comm_.world_size(); }
  int64_t global_batch() const { return cfg_.batch_size * cfg_.grad_accum * world(); }

  const TrainConfig& cfg_;
  const Communicator& comm_;
  ProgressReporter progress_;
  std::unique_ptr<MetricsFile> metrics_;
};

}  // namespace ddp
