// trainer_impl.h: the state of trainer.h's Trainer and its methods, shared
// by the two files that define them: the loop and its endings
// (trainer.cpp), the step and the benchmark (train_step.cpp). Private to
// those (and trainer_shards.cpp, its --zero parts); the parts it wires each
// have their own header:
//   epoch_cursor.h     where the run is in the data, which rows a step reads
//   step_state_view.h  the host's reads of the device step state, --max-bad-steps
//   captured_step.h    --cuda-graph capture and replay of the step
//   checkpointing.h    resume, restore, snapshot, checkpoint writes, outputs
//   run_report.h       the lines and metrics records, this run's tally
//   fault_hooks.h      test hooks: injected overflows, a stalled rank
//   stop_signal.h      SIGINT/SIGTERM: stops agreed at step boundaries
//   training_sampler.h --sample-every: rank 0's samples of a byte GPT between steps
//   step_trace.h       --trace: each rank's timeline of its steps
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/data/batch_loader.h"
#include "trainer/loop/captured_step.h"
#include "trainer/loop/checkpointing.h"
#include "trainer/loop/epoch_cursor.h"
#include "trainer/loop/evaluator.h"
#include "trainer/zero/layer_shards.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/mixed_precision_optimizer.h"
#include "comm/gradient_reducer.h"
#include "trainer/models/model.h"
#include "trainer/params/parameter_store.h"
#include "trainer/report/progress_reporter.h"
#include "trainer/loop/run_report.h"
#include "trainer/report/step_trace.h"
#include "trainer/loop/step_state_view.h"
#include "trainer/loop/trainer.h"
#include "trainer/modes/training_sampler.h"

namespace ddp {

struct Trainer::Impl {
  TrainConfig cfg;
  Backend& backend;
  Communicator& comm;
  TrainTestData data;
  std::unique_ptr<Model> model_owned;  // config/model_factory.h
  Model& model;
  ShardLayout shards;     // --zero: each rank's range of the flat layout (sharded_state.h)
  ParameterStore params;  // in the model's registry layout; sharded: the FP32 state of this rank's range
  MixedPrecisionOptimizer optimizer;
  LossScaleRule scale_rule;
  StepStateView state;  // the device step state and this step's loss, and the host's copy
  EpochCursor cursor;
  BatchLoader loader;
  Evaluator evaluator;
  LrSchedule schedule;
  ProgressReporter progress;
  GradientReducer reducer;  // the all-reduce buckets over the registry's tensors, overlapped with backward
  // params' buffers per tensor, as the model reads them (params/tensor_table.h);
  // at --zero 2 and 3 the sharded ones are the layer hooks' (layer_shards.h).
  ParameterTables tables = training_tables(params);
  std::unique_ptr<LayerShards> layer_shards;  // --zero 2 and 3: the hooks that stage gradients and gather weights
  // --zero >= 1 with whole FP16 gradients: the padding between tensors, as
  // (offset, count). An in-place reduce-scatter leaves other ranks' sums in
  // a rank's buffer (MPI_IN_PLACE's scratch), padding included, and
  // backward writes only tensors: these are zeroed before each step's sums,
  // so the padding's sum stays zero (it is in some rank's range: its check,
  // its norm).
  std::vector<GradientSegment> padding_gaps;
  const RunPlan plan;  // the steps and epochs this run takes
  RunReport report;
  CapturedStep captured;
  Checkpointing checkpoints;
  CollectiveWatchdog* watchdog = nullptr;  // not owned; null: collectives are not watched
  std::unique_ptr<TrainingSampler> sampler;  // --sample-every on rank 0; null on the others and without it
  std::unique_ptr<StepTracer> tracer;        // --trace; null without it (trainer_trace.cpp)
  int64_t step = 0;
  int64_t last_eval_step = -1;
  std::function<void(const uint32_t*, int)> batch_observer;  // test hook; may be empty
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
  void run_eval();  // the test-set evaluation, its line and record
  // --zero (trainer_shards.cpp).
  void wire_shards();                   // the reducer, the layer hooks, the padding for the stage
  StateBytes held_state_bytes() const;  // this rank's, by class (report/memory_report.h)
  void report_memory();                 // the banner's memory line and record (a collective)
  // `use` with a table of the whole FP16 weights: the training table, or at
  // --zero 3 a transient gather of them (a collective: every rank calls it).
  void with_whole_weights(const std::function<void(const WeightTable&)>& use);
  // --trace (trainer_trace.cpp): the tracer, wired to the reducer, the layer points and the transport.
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

  struct StepResult {
    StepOutcome outcome;  // grad_norm when logged; the skip decision is in the step state
    int64_t rows = 0;     // this rank's samples in the step
    double lr = 0;
    bool log_step = false;
  };

  // The step (train_step.cpp).
  // One optimizer step: K micro-batches forward/backward into the flat FP16
  // gradients, all-reduce, unscale/check/SGD, loss-scale update. Advances
  // step and the epoch position; evaluation and checkpoints are the caller's.
  StepResult train_step();

  // Forward, loss and backward of one micro-batch (`batch`, in an upload slot).
  // Only the last micro-batch's backward finishes gradients (no_sync before
  // it): its finished buckets start their all-reduces at once.
  void micro_batch_pass(const DeviceBatch& batch, int rows, int64_t micro, int64_t micro_batches);

  // What a --cuda-graph capture records: the step of one full micro-batch
  // on the graph's own input batch, without host reads.
  void captured_pass(const DeviceBatch& fixed);

  // The sums, then the optimizer step and the loss-scale update. The sum
  // over ranks was predivided by F: what is left to divide is N/F (prepared
  // as the step's 1/(S N/F)).
  StepOutcome reduce_and_update(bool log_step);

  // Starts the copy of the batch that follows micro-batch `micro` of step
  // `s`: what the next load() will ask for. Where there is no next load
  // (the run's last step, a stop) the copy is wasted; a load of other rows
  // would still get exactly those rows (BatchLoader::load), so prefetching
  // never changes a result.
  void prefetch_after(const StepSlice& s, int64_t micro);

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
  void report_progress(const StepResult& st, RunTally& tally);

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
