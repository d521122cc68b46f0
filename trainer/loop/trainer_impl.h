// trainer_impl.h: the state of trainer.h's Trainer: its construction and
// run() (trainer.cpp), the benchmark (trainer_bench.cpp), the memory line
// (trainer_shards.cpp), the trace wiring (trainer_trace.cpp). Private to those; the parts it wires each have their
// own header:
//   train_step.h       one optimizer step, and what only the step reads
//   epoch_cursor.h     where the run is in the data, which rows a step reads
//   step_state_view.h  the host's reads of the device step state, --max-bad-steps
//   evaluator.h        the test-set evaluation
//   checkpointing.h    resume, restore, snapshot, checkpoint writes, outputs
//   run_report.h       the lines and metrics records, this run's tally
//   stop_signal.h      SIGINT/SIGTERM: stops agreed at step boundaries
//   training_sampler.h --sample-every: rank 0's samples between steps
//   step_trace.h       --trace: each rank's timeline of its steps
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/loop/checkpointing.h"
#include "trainer/loop/epoch_cursor.h"
#include "trainer/loop/evaluator.h"
#include "trainer/loop/run_report.h"
#include "trainer/loop/step_state_view.h"
#include "trainer/loop/train_step.h"
#include "trainer/loop/trainer.h"
#include "trainer/models/model.h"
#include "trainer/modes/training_sampler.h"
#include "trainer/params/parameter_store.h"
#include "trainer/report/progress_reporter.h"
#include "trainer/report/step_trace.h"

namespace ddp {

struct Trainer::Impl {
  TrainConfig cfg;  // bound to the data (config/model_catalog.h), the batch per rank resolved
  Backend& backend;
  Communicator& comm;
  TrainTestData data;
  std::unique_ptr<Model> model_owned;  // config/model_factory.h
  Model& model;
  ShardLayout shards;     // --zero: each rank's range of the flat layout (sharded_state.h)
  ParameterStore params;  // in the model's registry layout; sharded: the FP32 state of this rank's range
  StepStateView state;    // the device step state and this step's loss, and the host's copy
  EpochCursor cursor;
  Evaluator evaluator;
  ProgressReporter progress;
  const RunPlan plan;  // the steps and epochs this run takes
  RunReport report;
  TrainStep train_step;
  Checkpointing checkpoints;
  CollectiveWatchdog* watchdog = nullptr;    // not owned; null: collectives are not watched
  std::unique_ptr<TrainingSampler> sampler;  // --sample-every on rank 0; null on the others and without it
  std::unique_ptr<StepTracer> tracer;        // --trace; null without it (trainer_trace.cpp)
  int64_t step = 0;
  int64_t last_eval_step = -1;
  EvalResult last_eval;
  bool prepared = false;

  Impl(const TrainConfig& c, Backend& b, Communicator& m, TrainTestData d);

  // Captured steps hold NCCL work: they go before the communicator does
  // (the Trainer is destroyed first, being declared after it).
  ~Impl() { backend.release_captures(); }

  int world() const { return comm.world_size(); }
  bool is_root() const { return comm.rank() == 0; }
  int64_t global_batch() const { return cursor.samples_per_rank_step() * world(); }
  void say(const std::string& line) { progress.permanent(line); }
  // The checkpoint of `at_step` for the lines and records ("": no --checkpoint-dir).
  std::string checkpoint_named(int64_t at_step) const {
    return cfg.checkpoint_dir.empty() ? std::string() : checkpoints.path_at(at_step);
  }

  void prepare();
  void run_eval();                      // the test-set evaluation, its line and record
  StateBytes held_state_bytes() const;  // this rank's, by class (report/memory_report.h)
  void report_memory();                 // the banner's memory line and record (a collective)
  // `use` with a table of the whole FP16 weights (TrainStep::with_whole_weights).
  void with_whole_weights(const std::function<void(const WeightTable&)>& use) {
    train_step.with_whole_weights(step, use);
  }
  // --trace (trainer_trace.cpp): the tracer, wired to the step, the layer points and the transport.
  void wire_tracer();

  // What the loop does after the step that made the count `step`: whether
  // it evaluates (an epoch's end, --eval-every's schedule, or the run's
  // last step when a sample falls on it: a sample follows its step's
  // evaluation line, and finish() would evaluate after it) and samples.
  bool sample_due() const { return cfg.sample_every > 0 && step % cfg.sample_every == 0; }
  bool eval_due(bool last_step_of_run) const {
    return cursor.epoch_done() || (cfg.eval_every > 0 && step % cfg.eval_every == 0) ||
           (last_step_of_run && sample_due());
  }

  // --bench (trainer_bench.cpp): warm-up steps, then timed ones.
  BenchTimings bench(int64_t warmup_steps, int64_t timed_steps);

  // The loop and its endings (trainer.cpp).
  TrainSummary run();
  // --eval-only: the test-set evaluation of the starting weights, its line and record.
  TrainSummary evaluate_only();

  // The step state after a step where state.due(): an ending at
  // --max-bad-steps throws here, on every rank at the same step.
  // `before_eval`: an evaluation follows (the step's time then includes its device work).
  void read_step_state(bool before_eval);

  // The log line and record of a --log-every step, and the live line.
  void report_progress(const TrainStep::Result& st, RunTally& tally);

  // After the loop: the stop, or the final evaluation, checkpoint, weights
  // and summary.
  TrainSummary finish(int stop_signal, RunTally& tally);

  // The summary fields every ending of run() shares (finished or stopped).
  TrainSummary summary_of_run(const RunTally& tally);

  // The stop signal all ranks act on at this step boundary: the largest any
  // of them received (a host all-reduce; a world of one reads its own).
  int agreed_stop_signal();

  // The run's results are written: a later signal ends the process at once
  // (stop_signal.h), and one that came during the final evaluation and
  // writes, kept until now so they completed, still sets the exit status.
  TrainSummary finished_despite_signal(TrainSummary sum);

  // The end of a run that a signal stopped at a step boundary: a checkpoint
  // (when there is a --checkpoint-dir), one line, a metrics record; no
  // evaluation, so the process ends well within a launcher's grace period.
  TrainSummary stopped_by(int signal, const RunTally& tally);
};

}  // namespace ddp
