// trainer_impl.h: trainer.h's Trainer: its construction, prepare() and
// run() with the run's endings (trainer.cpp), the benchmark
// (trainer_bench.cpp), the memory line (trainer_shards.cpp), the trace
// wiring (trainer_trace.cpp). Private to those; its members are the parts
// it wires, each with its own header:
//   train_step.h       one optimizer step, and what only the step reads
//   epoch_cursor.h     where the run is in the data, which rows a step reads
//   step_state_view.h  the host's reads of the device step state, --max-bad-steps
//   evaluator.h        the test-set evaluation
//   checkpointing.h    resume, restore, snapshot, checkpoint writes, outputs
//   run_report.h       the lines (and the live line) and metrics records, this run's tally
//   stop_signal.h      SIGINT/SIGTERM: stops agreed at step boundaries
//   training_sampler.h --sample-every: rank 0's samples between steps
//   step_trace.h       --trace: each rank's timeline of its steps
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
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

class Trainer::Impl {
 public:
  Impl(const TrainConfig& c, Backend& b, Communicator& m, TrainTestData d);
  // Captured steps hold NCCL work: they go before the communicator does
  // (the Trainer is destroyed first, being declared after it).
  ~Impl() { backend_.release_captures(); }

  // trainer.h's Trainer, one for one.
  void prepare();
  void watch_collectives(CollectiveWatchdog* watchdog);
  TrainSummary run();
  // --eval-only: the test-set evaluation of the starting weights, its line and record.
  TrainSummary evaluate_only();
  // --bench (trainer_bench.cpp): warm-up steps, then timed ones.
  BenchTimings bench(int64_t warmup_steps, int64_t timed_steps);
  TrainState snapshot() { return checkpoints_.snapshot(step_); }  // a collective at --zero
  StateBytes held_state_bytes() const;                            // this rank's, by class (report/memory_report.h)
  std::vector<lowp16> weights_lowp();
  void observe_batches(std::function<void(const uint32_t* indices, int rows)> observer) {
    train_step_.observe_batches(std::move(observer));
  }
  BatchLoaderCounts loader_counts() const { return train_step_.loader_counts(); }

 private:
  // What watches the run and changes none of its results; each may be absent.
  struct Observers {
    CollectiveWatchdog* watchdog = nullptr;    // not owned; null: collectives are not watched
    std::unique_ptr<StepTracer> tracer;        // --trace; null without it (trainer_trace.cpp)
    std::unique_ptr<TrainingSampler> sampler;  // --sample-every on rank 0; null on the others and without it
  };

  int world() const { return comm_.world_size(); }
  bool is_root() const { return comm_.rank() == 0; }
  int64_t global_batch() const { return cursor_.samples_per_rank_step() * world(); }
  void say(const std::string& line) { report_.say(line); }
  // The checkpoint of `at_step` for the lines and records ("": no --checkpoint-dir).
  std::string checkpoint_named(int64_t at_step) const {
    return cfg_.checkpoint_dir.empty() ? std::string() : checkpoints_.path_at(at_step);
  }

  void run_eval();       // the test-set evaluation, its line and record
  void report_memory();  // the banner's memory line and record (a collective)
  // `use` with a table of the whole FP16 weights (TrainStep::with_whole_weights).
  void with_whole_weights(const std::function<void(const WeightTable&)>& use) {
    train_step_.with_whole_weights(step_, use);
  }
  // --trace (trainer_trace.cpp): the tracer, wired to the step, the layer points and the transport.
  void wire_tracer();

  // What the loop does after the step that made the count `step_`: whether
  // it evaluates (an epoch's end, --eval-every's schedule, or the run's
  // last step when a sample falls on it: a sample follows its step's
  // evaluation line, and finish() would evaluate after it) and samples.
  bool sample_due() const { return cfg_.sample_every > 0 && step_ % cfg_.sample_every == 0; }
  bool eval_due(bool last_step_of_run) const {
    return cursor_.epoch_done() || (cfg_.eval_every > 0 && step_ % cfg_.eval_every == 0) ||
           (last_step_of_run && sample_due());
  }

  // The step state after a step where state_.due(): an ending at
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

  // Built in this order, each from those above it.
  const TrainConfig cfg_;  // bound to the data (config/model_catalog.h), the batch per rank resolved
  Backend& backend_;
  Communicator& comm_;
  TrainTestData data_;
  const std::unique_ptr<Model> model_;  // config/model_factory.h
  const ShardLayout shards_;            // --zero: each rank's range of the flat layout (sharded_state.h)
  ParameterStore params_;               // in the model's registry layout; sharded: the FP32 state of this rank's range
  StepStateView state_;                 // the device step state and this step's loss, and the host's copy
  EpochCursor cursor_;
  Evaluator evaluator_;  // and the last evaluation's result
  const RunPlan plan_;   // the steps and epochs this run takes
  RunReport report_;     // the lines (its progress reporter) and the metrics records
  TrainStep train_step_;
  Checkpointing checkpoints_;
  Observers observers_;
  int64_t step_ = 0;
  bool prepared_ = false;
};

}  // namespace ddp
