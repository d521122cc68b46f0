// trainer.cpp: the loop of trainer.h. Per iteration: load the rank's batch
// (copied to the device one batch ahead, batch_loader.h), FP16 forward, FP32
// loss, scaled FP16 loss gradient, FP16 backward into the flat gradient
// buffer, FP16 all-reduce, unscale/check/clip/SGD on the FP32 masters,
// loss-scale update. Evaluation at each epoch end; metrics,
// progress and checkpoints at their intervals.
//
// The step lives here, and run() wires the parts:
//   epoch_cursor.h     where the run is in the data, which rows a step reads
//   step_state_view.h  the host's reads of the device step state, --max-bad-steps
//   captured_step.h    --cuda-graph capture and replay of the step
//   checkpointing.h    resume, restore, snapshot, checkpoint writes, outputs
//   run_report.h       the lines and metrics records, this run's tally
//   fault_hooks.h      test hooks: injected overflows, a stalled rank
//   stop_signal.h      SIGINT/SIGTERM: stops agreed at step boundaries
#include "trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "kernels/error.h"
#include "trainer/batch_loader.h"
#include "trainer/captured_step.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpointing.h"
#include "trainer/epoch_cursor.h"
#include "trainer/evaluator.h"
#include "trainer/fault_hooks.h"
#include "trainer/gradient_buckets.h"
#include "trainer/mixed_precision_optimizer.h"
#include "trainer/mlp_model.h"
#include "trainer/progress_reporter.h"
#include "trainer/run_report.h"
#include "trainer/step_state_view.h"
#include "trainer/stop_signal.h"
#include "trainer/weights_io.h"

namespace ddp {
namespace {
OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig o;
  o.momentum = c.momentum;
  o.weight_decay = c.weight_decay;
  o.nesterov = c.nesterov;
  o.clip_grad_norm = c.clip_grad_norm;
  return o;
}

TrainConfig with_batch_per_rank(TrainConfig c, int world_size) {
  c.batch_size = resolve_batch_per_rank(c, world_size);
  return c;
}
}  // namespace

struct Trainer::Impl {
  TrainConfig cfg;
  Backend& backend;
  Communicator& comm;
  TrainTestData data;
  ParameterLayout layout;
  ParameterStore params;
  MlpModel model;
  MixedPrecisionOptimizer optimizer;
  LossScaleRule scale_rule;
  StepStateView state;  // the device step state and this step's loss, and the host's copy
  EpochCursor cursor;
  BatchLoader loader;
  Evaluator evaluator;
  LrSchedule schedule;
  ProgressReporter progress;
  std::vector<GradientBucket> buckets;  // all-reduce units, in the order backward completes them
  RunPlan plan;                         // set in the constructor's body
  RunReport report;
  CapturedStep captured;
  Checkpointing checkpoints;
  CollectiveWatchdog* watchdog = nullptr;  // not owned; null: collectives are not watched
  int64_t step = 0;
  int64_t last_eval_step = -1;
  std::function<void(const uint32_t*, int)> batch_observer;  // test hook; may be empty
  EvalResult last_eval;
  bool prepared = false;

  Impl(const TrainConfig& c, Backend& b, Communicator& m, TrainTestData d)
      : cfg(with_batch_per_rank(c, m.world_size())),
        backend(b),
        comm(m),
        data(std::move(d)),
        layout(ParameterLayout::for_mlp(c.layer_widths)),
        params(b, layout),
        model(b, layout, cfg.activation, static_cast<int>(cfg.batch_size)),
        optimizer(b, params, optimizer_config(c)),
        scale_rule(loss_scale_rule(c.loss_scaler, c.max_bad_steps)),
        state(b, cfg),
        cursor(cfg, data.train.count, m.rank(), m.world_size()),
        loader(b, data.train, static_cast<int>(cfg.batch_size)),
        evaluator(b, data.test, static_cast<int>(cfg.batch_size)),
        progress(m.rank() == 0),
        buckets(plan_gradient_buckets(layout, static_cast<size_t>(cfg.bucket_mb * (1 << 20)),
                                      static_cast<size_t>(cfg.first_bucket_mb * (1 << 20)))),
        report(cfg, m, progress),
        captured(cfg, b, m, data.train, optimizer, progress),
        checkpoints(cfg, data.train, params, state, cursor, m, progress, plan) {
    plan = plan_run(cfg, cursor);
    schedule.kind = cfg.lr_schedule;
    schedule.base_lr = cfg.lr;
    schedule.total_steps = plan.total_steps;
    schedule.warmup_steps = cfg.warmup_steps;
    schedule.step_size = cfg.lr_step_size;
    schedule.gamma = cfg.lr_gamma;
    if (cfg.cuda_graph) captured.enable();
  }

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

  void prepare() {
    std::string resume_from;
    if (cfg.resume) resume_from = checkpoints.resolve_resume_path();
    if (!resume_from.empty()) {
      step = checkpoints.restore(read_checkpoint(resume_from), resume_from);
    } else {
      std::vector<float> init = cfg.init_weights_dir.empty() ? init_linear_parameters(layout, cfg.seed)
                                                             : load_weights_npy(cfg.init_weights_dir, layout);
      params.set_master_weights(init);
      if (!cfg.init_weights_dir.empty()) say("initial weights from " + cfg.init_weights_dir);
    }
    // A lineage for a run from scratch, or for one resumed from a
    // checkpoint of an earlier build that recorded none.
    checkpoints.ensure_run_id();
    // Every rank starts from rank 0's parameters, whatever its seed.
    {
      CollectiveWatch watch(watchdog, "broadcast", step + 1);
      comm.broadcast_bytes(params.master_weights_fp32.data(), params.master_weights_fp32.size_bytes(), 0);
      comm.broadcast_bytes(params.momentum_fp32.data(), params.momentum_fp32.size_bytes(), 0);
      comm.broadcast_bytes(checkpoints.run_id_data(), sizeof(uint64_t), 0);
    }
    if (is_root()) report.set_metrics(checkpoints.prepare_outputs(step));
    backend.cast_fp32_to_fp16(params.master_weights_fp32.data(), params.weights_fp16.data(), params.count());
    state.upload(step);
    prepared = true;
  }

  void run_eval() {
    {
      CollectiveWatch watch(watchdog, "evaluation", step);  // its sums wait for the slowest rank's forward passes
      last_eval = evaluator.run(comm, model, cfg.loss, params.weights_fp16.data());
    }
    last_eval_step = step;
    report.eval(last_eval, step, cursor.epoch() + 1, plan.epochs_total);
  }

  struct StepResult {
    StepOutcome outcome;  // grad_norm when logged; the skip decision is in the step state
    int64_t rows = 0;     // this rank's samples in the step
    double lr = 0;
    bool log_step = false;
  };

  // One optimizer step: K micro-batches forward/backward into the flat FP16
  // gradients, all-reduce, unscale/check/SGD, loss-scale update. Advances
  // step and the epoch position; evaluation and checkpoints are the caller's.
  StepResult train_step() {
    stall_if_asked(cfg, comm.rank(), step + 1);
    // Where the host may block in a step (the batch upload, the optimizer's
    // reads when clipping or logging, CPU ranks' wait for the sums) it is
    // waiting, directly or through the device, for the step's collectives.
    CollectiveWatch watch(watchdog, "all-reduce", step + 1);
    const StepSlice now = cursor.now();
    const std::vector<uint32_t>& order = cursor.order_for(now.epoch);
    const int64_t step_rows = now.step_rows, micro_batches = now.micro_batches;
    StepResult r;
    r.rows = step_rows;
    r.lr = schedule.lr_at(step);
    r.log_step = (step + 1) % cfg.log_every == 0 || step + 1 == plan.total_steps;
    // Each micro-batch's loss is a mean over its rows; the step's gradient
    // is their mean (1/micro_batches, as `loss / K` in PyTorch), divided by
    // --grad-predivide before the all-reduce. All of it rides on the scale
    // of the loss gradient, so backward needs no extra pass. The scale lives
    // on the device: prepare derives the step's scalars there (queued, no wait).
    backend.step_status_prepare(state.device(), static_cast<double>(micro_batches) * cfg.grad_predivide,
                                world() / cfg.grad_predivide, static_cast<float>(r.lr));
    const bool replayed = captured.eligible(micro_batches, step_rows, r.log_step, step + 1);
    for (int64_t micro = 0; micro < micro_batches; ++micro) {
      const uint32_t* batch_indices = order.data() + cursor.micro_first(now, micro);
      const int rows = cursor.micro_rows(now, micro);
      if (batch_observer) batch_observer(batch_indices, rows);
      const DeviceBatch batch = loader.load(batch_indices, rows);  // outside any capture
      if (replayed) captured.replay(batch, step + 1, [this](const DeviceBatch& fixed) { captured_pass(fixed); });
      else micro_batch_pass(batch, rows, micro, micro_batches);
      // With this micro-batch's work queued (on a GPU the device is busy
      // with it), gather the next one and queue its copy.
      if (cfg.prefetch_batches) prefetch_after(now, micro);
    }
    if (!replayed) {
      r.outcome = reduce_and_update(r.log_step);
      captured.count_eager_step(micro_batches, step_rows, r.log_step, step + 1);
    }
    ++step;
    cursor.advance(step_rows);
    return r;
  }

  // Forward, loss and backward of one micro-batch (`batch`, in an upload slot).
  // Only the last micro-batch's backward finishes gradients (no_sync before
  // it): its finished buckets start their all-reduces at once.
  void micro_batch_pass(const DeviceBatch& batch, int rows, int64_t micro, int64_t micro_batches) {
    const ScalarArg backward_scale = ScalarArg::at(&state.device()->backward_scale);
    const half16* out = model.forward(batch.features_fp16, rows, params.weights_fp16.data());
    const int classes = model.output_width();
    if (cfg.loss == LossKind::SoftmaxCrossEntropy) {
      backend.softmax_xent_forward(out, batch.labels, rows, classes, state.loss_mean_device(), nullptr);
      backend.softmax_xent_backward(out, batch.labels, rows, classes, backward_scale, model.output_grad());
    } else {
      backend.mse_forward(out, batch.targets_fp32, rows, classes, state.loss_mean_device());
      backend.mse_backward(out, batch.targets_fp32, rows, classes, backward_scale, model.output_grad());
    }
    const bool last = micro + 1 == micro_batches;
    model.backward(rows, params.weights_fp16.data(), params.grads_fp16.data(), /*accumulate=*/micro > 0,
                   last ? std::function<void(int)>([this](int layer) { layer_gradients_done(layer); }) : nullptr);
  }

  // What a --cuda-graph capture records: the step of one full micro-batch
  // on the graph's own input batch, without host reads.
  void captured_pass(const DeviceBatch& fixed) {
    micro_batch_pass(fixed, fixed.rows, 0, 1);
    reduce_and_update(false);
  }

  // The sums, then the optimizer step and the loss-scale update. The sum
  // over ranks was predivided by F: what is left to divide is N/F (prepared
  // as the step's 1/(S N/F)).
  StepOutcome reduce_and_update(bool log_step) {
    comm.wait_allreduces();
    const StepOutcome outcome = optimizer.step(state.device(), log_step);
    backend.step_status_finish(scale_rule, state.device());
    return outcome;
  }

  // Starts the all-reduce of the bucket that layer completes, if any.
  void layer_gradients_done(int layer) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].lowest_layer != layer) continue;
      // The overflow test hook lands in the first element, in bucket 0.
      if (b == 0 && overflow_injected_at(cfg, comm.rank(), step + 1)) inject_overflow(backend, params.grads_fp16.data());
      comm.start_allreduce_sum_fp16(params.grads_fp16.data() + buckets[b].offset, buckets[b].count);
    }
  }

  // Starts the copy of the batch that follows micro-batch `micro` of step
  // `s`: what the next load() will ask for. Where there is no next load
  // (the run's last step, a stop) the copy is wasted; a load of other rows
  // would still get exactly those rows (BatchLoader::load), so prefetching
  // never changes a result.
  void prefetch_after(const StepSlice& s, int64_t micro) {
    const BatchRows next = cursor.prefetch_target(s, micro);
    loader.prefetch(next.indices, next.rows);
  }

  BenchTimings bench(int64_t warmup_steps, int64_t timed_steps) {
    DDP_REQUIRE(prepared, "Trainer::bench before prepare");
    BenchTimings t;
    t.global_samples_per_step = global_batch();
    auto one_step = [this] {
      train_step();
      if (cursor.epoch_done()) cursor.next_epoch();
    };
    for (int64_t i = 0; i < warmup_steps; ++i) one_step();
    backend.synchronize();
    {
      CollectiveWatch watch(watchdog, "barrier", step);
      comm.barrier();
    }
    comm.take_allreduce_times();
    const int64_t replays_before = captured.replays();
    for (int64_t i = 0; i < timed_steps; ++i) {
      const auto start = Clock::now();
      one_step();
      backend.synchronize();
      t.step_s.push_back(seconds_since(start));
    }
    t.allreduce = comm.take_allreduce_times();
    t.graph_replays = captured.replays() - replays_before;
    return t;
  }

  TrainSummary run() {
    DDP_REQUIRE(prepared, "Trainer::run before prepare");
    report.banner(params.count(), data.train, data.test, plan);
    RunTally tally;
    // From here a signal only asks for a stop at the next agreed point (see
    // stop_signal.h); until here it ended the process at once.
    set_stop_signal_phase(StopSignalPhase::Training);
    int stop_signal = 0;

    while (step < plan.total_steps && !(cfg.stop_after_steps > 0 && tally.steps >= cfg.stop_after_steps)) {
      const auto step_start = Clock::now();
      const StepResult st = train_step();
      const bool due = state.due(step, plan.total_steps, st.log_step, cursor.epoch_done());
      if (due) read_step_state();
      tally.count_step(st.rows * world(), seconds_since(step_start));
      report_progress(st, tally);
      if (cursor.epoch_done()) {
        run_eval();
        cursor.next_epoch();
      }
      if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0) checkpoints.write(step);
      // Ranks agree on a stop at the same deterministic points where they
      // read the step state (every step on CPU ranks, at most 50 apart on
      // GPUs): a host collective every step would tie the hosts together.
      if (due && (stop_signal = agreed_stop_signal()) != 0) break;
    }
    return finish(stop_signal, tally);
  }

  // The step state after a step where state.due(): an ending at
  // --max-bad-steps throws here, on every rank at the same step.
  void read_step_state() {
    {
      // The read waits for the device, which may wait for a peer. Before
      // an evaluation or the end, the step's time includes its device work.
      CollectiveWatch watch(watchdog, "all-reduce", step);
      if (cursor.epoch_done() || step >= plan.total_steps) backend.synchronize();
      state.read(step);
    }
    state.check_bad_steps();
  }

  // The log line and record of a --log-every step, and the live line.
  void report_progress(const StepResult& st, RunTally& tally) {
    ProgressSnapshot snap;
    snap.epoch = cursor.epoch() + 1, snap.epochs = plan.epochs_total, snap.step = step;
    snap.total_steps = plan.total_steps;
    snap.eta_s = tally.train_s / tally.steps * (plan.total_steps - step);
    const StepStatus& status = state.host();
    if (st.log_step) {
      // read_step_state() read the step state (and this rank's loss) after
      // this step: the scale the step ran with and whether it was skipped.
      snap.loss_scale = status.step_scale, snap.skipped = status.last_skipped != 0;
      {
        CollectiveWatch watch(watchdog, "host all-reduce", step);
        snap.loss = comm.allreduce_sum_host(state.loss()) / world();
      }
      snap.samples_per_s = tally.interval_samples_per_s();
      const AllreduceTimes interval_allreduce = comm.take_allreduce_times();
      tally.allreduce += interval_allreduce;
      // Replayed steps' all-reduces are not timed: with graphs, no figure (null).
      const double untimed = std::numeric_limits<double>::quiet_NaN();
      snap.allreduce_ms_per_step =
          captured.enabled() ? untimed : 1e3 * interval_allreduce.busy_s / tally.interval_steps;
      const double hidden = captured.enabled() ? untimed : interval_allreduce.hidden_fraction();
      tally.start_interval();
      report.log_step(snap, st.lr, st.outcome.grad_norm, hidden);
    }
    if (is_root() && progress.live_line_due()) {
      // Rank 0's loss and step state as of the last read (every step on
      // CPU ranks, at most 50 steps old on GPUs): a live line must not
      // wait for the device, which may be waiting for a peer.
      snap.loss = state.loss();
      snap.loss_scale = status.step_scale, snap.skipped = status.last_skipped != 0;
      snap.samples_per_s = tally.samples_per_s();
      progress.live_line(snap);
    }
  }

  // After the loop: the stop, or the final evaluation, checkpoint, weights
  // and summary.
  TrainSummary finish(int stop_signal, RunTally& tally) {
    // The loop may end (--stop-after-steps, a signal) between two reads of
    // the step state: a --max-bad-steps ending reached since the last read
    // must not pass for a finished run (every rank ends here at one step).
    {
      CollectiveWatch watch(watchdog, "all-reduce", step);
      state.read(step);
    }
    state.check_bad_steps();
    // A signal since the loop's last agreed check (the loop ended by its step
    // count) stops the run before the final evaluation: every rank is here at
    // the same step, so none skips a collective the others enter.
    if (stop_signal == 0) stop_signal = agreed_stop_signal();
    if (stop_signal != 0) return stopped_by(stop_signal, tally);
    if (step < plan.total_steps)
      say("stopping after " + std::to_string(tally.steps) + " steps (--stop-after-steps) at step " +
          std::to_string(step) + " of " + std::to_string(plan.total_steps));
    if (last_eval_step != step) run_eval();
    checkpoints.write(step);
    if (is_root() && !cfg.save_weights_dir.empty()) {
      save_weights_npy(cfg.save_weights_dir, layout, params.master_weights_fp32.download());
      say("weights saved to " + cfg.save_weights_dir);
    }

    TrainSummary sum = summary_of_run(tally);
    tally.allreduce += comm.take_allreduce_times();
    sum.allreduce_ms_per_step = tally.steps > 0 ? 1e3 * tally.allreduce.busy_s / tally.steps : 0.0;
    sum.allreduce_hidden_fraction = tally.allreduce.hidden_fraction();
    if (captured.enabled())
      sum.allreduce_ms_per_step = sum.allreduce_hidden_fraction = std::numeric_limits<double>::quiet_NaN();
    report.summary(sum, state.host().scale, captured.enabled());
    return finished_despite_signal(sum);
  }

  // The summary fields every ending of run() shares (finished or stopped).
  TrainSummary summary_of_run(const RunTally& tally) {
    const StepStatus& status = state.read(step);
    TrainSummary sum;
    sum.test_loss = last_eval.loss;
    sum.test_accuracy = last_eval.accuracy;
    sum.steps = tally.steps;
    sum.graph_replays = captured.replays();
    sum.final_step = step;
    sum.skipped_steps = status.skipped_total;
    sum.samples_per_s = tally.samples_per_s();
    sum.wall_s = seconds_since(tally.run_start);
    return sum;
  }

  // The stop signal all ranks act on at this step boundary: the largest any
  // of them received (a host all-reduce; a world of one reads its own).
  int agreed_stop_signal() {
    const int64_t mine = pending_stop_signal();
    if (world() == 1) return static_cast<int>(mine);
    CollectiveWatch watch(watchdog, "stop-flag all-reduce", step);
    return static_cast<int>(comm.allreduce_max_host(mine));
  }

  // The run's results are written: a later signal ends the process at once
  // (stop_signal.h), and one that came during the final evaluation and
  // writes, kept until now so they completed, still sets the exit status.
  TrainSummary finished_despite_signal(TrainSummary sum) {
    set_stop_signal_phase(StopSignalPhase::Finished);
    sum.stop_signal = agreed_stop_signal();
    if (sum.stop_signal != 0) report.finished_despite_signal(sum.stop_signal, step, checkpoint_named(step));
    return sum;
  }

  // The end of a run that a signal stopped at a step boundary: a checkpoint
  // (when there is a --checkpoint-dir), one line, a metrics record; no
  // evaluation, so the process ends well within a launcher's grace period.
  TrainSummary stopped_by(int signal, const RunTally& tally) {
    checkpoints.write(step);
    report.stopped_line(signal, step, checkpoint_named(step));
    TrainSummary sum = summary_of_run(tally);
    sum.stop_signal = signal;
    report.stopped_record(signal, step, sum, checkpoint_named(step));
    return sum;
  }
};

Trainer::Trainer(const TrainConfig& config, Backend& backend, Communicator& comm, TrainTestData data)
    : impl_(std::make_unique<Impl>(config, backend, comm, std::move(data))) {}
Trainer::~Trainer() = default;
void Trainer::prepare() { impl_->prepare(); }
void Trainer::watch_collectives(CollectiveWatchdog* watchdog) { impl_->watchdog = watchdog; }
TrainSummary Trainer::run() { return impl_->run(); }
BenchTimings Trainer::bench(int64_t warmup_steps, int64_t timed_steps) {
  return impl_->bench(warmup_steps, timed_steps);
}
TrainState Trainer::snapshot() const { return impl_->checkpoints.snapshot(impl_->step); }
void Trainer::observe_batches(std::function<void(const uint32_t* indices, int rows)> observer) {
  impl_->batch_observer = std::move(observer);
}
BatchLoaderCounts Trainer::loader_counts() const { return impl_->loader.counts(); }

}  // namespace ddp
