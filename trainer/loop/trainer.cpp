// trainer.cpp: the loop of trainer.h. Per iteration: load the rank's batch
// (copied to the device one batch ahead, batch_loader.h), FP16 forward, FP32
// loss, scaled FP16 loss gradient, FP16 backward into the flat gradient
// buffer, FP16 all-reduce, unscale/check/clip/SGD on the FP32 masters,
// loss-scale update. Evaluation at each epoch end and every --eval-every
// steps, a sample every --sample-every steps; metrics, progress and
// checkpoints at their intervals.
//
// This file: the Trainer's construction, prepare(), the loop and its
// endings. The step itself is train_step.h's; the parts the Trainer wires
// are listed in trainer_impl.h.
#include "trainer/loop/trainer.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "kernels/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config_check.h"
#include "trainer/loop/fault_hooks.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_factory.h"
#include "trainer/zero/sharded_state.h"
#include "trainer/loop/stop_signal.h"
#include "trainer/loop/trainer_impl.h"
#include "trainer/io/input_file.h"
#include "trainer/report/memory_report.h"
#include "trainer/checkpoint/weights_io.h"
#include "trainer/checkpoint/hf_gpt2.h"
#include "trainer/checkpoint/weights_dtype.h"
#include "trainer/params/weights_range.h"

namespace ddp {
namespace {
TrainConfig with_batch_per_rank(TrainConfig c, int world_size) {
  c.batch_size = resolve_batch_per_rank(c, world_size);
  return c;
}

// --zero 1 and above: the FP32 state of this rank's range of its shard group only.
ShardRange owned_range(const TrainConfig& c, const ShardLayout& shards, int rank) {
  return c.zero_stage > 0 ? shards.range(rank) : ShardRange{0, shards.total_count()};
}

// Stage 2 keeps the gradients of its range only when they need not add up
// over micro-batches (--grad-accum 1); with accumulation they stay whole
// between micro-batches, as at stage 1.
ParameterStore::Sharding sharding_of(const TrainConfig& c) {
  ParameterStore::Sharding s;
  s.state = c.zero_stage >= 1;
  s.grads = c.zero_stage >= 2 && c.grad_accum == 1;
  s.weights = c.zero_stage >= 3;
  return s;
}

}  // namespace

Trainer::Impl::Impl(const TrainConfig& c, Backend& b, Communicator& m, TrainTestData d)
    : cfg_(bind_model_to_data(with_batch_per_rank(c, m.world_size()), d)),
      backend_(b),
      comm_(m),
      data_(std::move(d)),
      model_(make_model(cfg_, b, static_cast<int>(cfg_.batch_size))),
      shards_(zero_shard_layout(model_->parameters().flat_count(), m.shard_size())),
      params_(b, model_->parameters(), owned_range(cfg_, shards_, m.shard_rank()), sharding_of(cfg_)),
      state_(b, cfg_),
      cursor_(cfg_, data_.train.count, m.rank(), m.world_size()),
      evaluator_(b, data_.test, static_cast<int>(cfg_.batch_size)),
      plan_(plan_run(cfg_, cursor_)),
      report_(cfg_, m),
      train_step_(cfg_, b, m, *model_, params_, shards_, state_, cursor_, data_.train, plan_, report_.progress()),
      checkpoints_(cfg_, data_.train, params_, state_, cursor_, m, report_.progress(), plan_) {
  if (!cfg_.trace_path.empty()) wire_tracer();
  if (cfg_.sample_every > 0) {
    TrainingSampler::check(cfg_);  // on every rank: all refuse alike
    if (is_root()) observers_.sampler = std::make_unique<TrainingSampler>(cfg_, backend_);
  }
}

void Trainer::Impl::prepare() {
  std::string resume_from;
  if (cfg_.resume) resume_from = checkpoints_.resolve_resume_path();
  if (!resume_from.empty() && cfg_.eval_only) {
    step_ = checkpoints_.restore_weights(read_checkpoint(resume_from), resume_from);
  } else if (!resume_from.empty()) {
    step_ = checkpoints_.restore(read_checkpoint(resume_from), resume_from);
  } else {
    const ParameterRegistry& registry = model_->parameters();
    if (!cfg_.init_weights_dir.empty()) {
      check_weights_tokenizer(cfg_.init_weights_dir, cfg_.tokenizer);
      if (is_hf_gpt2_weights(cfg_.init_weights_dir))
        check_hf_gpt2_vocab(cfg_.init_weights_dir, model_token_shape(cfg_).real_vocab);
    }
    std::vector<float> init = cfg_.init_weights_dir.empty() ? registry.initial_values(cfg_.seed)
                                                            : load_weights(cfg_.init_weights_dir, registry);
    if (!cfg_.init_weights_dir.empty())
      check_weights_fit_precision(init, false, registry, cfg_.precision, "--init-weights " + cfg_.init_weights_dir);
    if (params_.sharded()) agree_with_root(comm_, backend_, init);  // before it is cut: see below
    params_.set_master_weights(init);
    if (!cfg_.init_weights_dir.empty()) say("initial weights from " + cfg_.init_weights_dir);
    if (!cfg_.init_weights_note.empty()) say(cfg_.init_weights_note);
  }
  // Every rank must take the same path (the sharded paths' collectives
  // differ): one whose scan of --checkpoint-dir disagrees stops them all.
  const int64_t found = resume_from.empty() ? 0 : 1;
  if (comm_.allreduce_max_host(found) != -comm_.allreduce_max_host(-found))
    throw AgreedError("--resume: the ranks do not all see a checkpoint in " + cfg_.checkpoint_dir +
                      " (a directory every rank must share)");
  // A lineage for a run from scratch, or for one resumed from a
  // checkpoint of an earlier build that recorded none. Only rank 0 writes
  // checkpoints, so only its id is ever used: it is not broadcast (NCCL's
  // broadcast takes device memory, and the id lives on the host).
  checkpoints_.ensure_run_id();
  // Every rank starts from rank 0's parameters, whatever its seed. Sharded,
  // the whole vectors were agreed on before each rank took its range
  // (agree_with_root: here, and in the checkpoint's restore).
  if (!params_.sharded()) {
    CollectiveWatch watch(observers_.watchdog, "broadcast", step_ + 1);
    comm_.broadcast_bytes(params_.master_weights_fp32.data(), params_.master_weights_fp32.size_bytes(), 0);
    comm_.broadcast_bytes(params_.momentum_fp32.data(), params_.momentum_fp32.size_bytes(), 0);
    if (params_.second_moment_fp32.count() > 0)  // AdamW's
      comm_.broadcast_bytes(params_.second_moment_fp32.data(), params_.second_moment_fp32.size_bytes(), 0);
  }
  if (is_root()) report_.set_metrics(checkpoints_.prepare_outputs(step_));
  params_.narrow_masters_to_weights();
  if (params_.sharded() && !params_.weights_sharded()) {  // stage 3's layers gather what they read
    CollectiveWatch watch(observers_.watchdog, "all-gather", step_ + 1);
    comm_.allgather_lowp(params_.owned_weights_lowp(), params_.weights_lowp.data(), shards_);
  }
  state_.upload(step_);
  prepared_ = true;
}

void Trainer::Impl::run_eval() {
  if (observers_.tracer) observers_.tracer->begin_span("eval");
  with_whole_weights([this](const WeightTable& weights) {
    // Its sums wait for the slowest rank's forward passes.
    CollectiveWatch watch(observers_.watchdog, "evaluation", step_);
    evaluator_.run_at(step_, comm_, *model_, cfg_.loss, weights);
  });
  if (observers_.tracer) observers_.tracer->end_span();
  report_.eval(evaluator_.last(), step_, cursor_.epoch() + 1, plan_.epochs_total);
}

TrainSummary Trainer::Impl::evaluate_only() {
  DDP_REQUIRE(prepared_, "Trainer::evaluate before prepare");
  report_.banner(model_->parameters().parameter_count(), data_.train, data_.test, plan_);
  with_whole_weights([this](const WeightTable& weights) {
    CollectiveWatch watch(observers_.watchdog, "evaluation", step_);
    evaluator_.run_at(step_, comm_, *model_, cfg_.loss, weights);
  });
  report_.eval_only(evaluator_.last(), step_);
  TrainSummary sum;
  sum.test_loss = evaluator_.last().loss;
  sum.test_accuracy = evaluator_.last().accuracy;
  sum.final_step = step_;
  return sum;
}

TrainSummary Trainer::Impl::run() {
  DDP_REQUIRE(prepared_, "Trainer::run before prepare");
  report_.banner(model_->parameters().parameter_count(), data_.train, data_.test, plan_);
  report_memory();
  RunTally tally;
  // From here a signal only asks for a stop at the next agreed point (see
  // stop_signal.h); until here it ended the process at once.
  set_stop_signal_phase(StopSignalPhase::Training);
  int stop_signal = 0;

  while (step_ < plan_.total_steps && !(cfg_.stop_after_steps > 0 && tally.steps >= cfg_.stop_after_steps)) {
    if (observers_.tracer) {  // the trace window's barrier, before the step's clock starts
      CollectiveWatch watch(observers_.watchdog, "barrier", step_ + 1);
      observers_.tracer->prepare_step(step_ + 1);
    }
    const auto step_start = Clock::now();
    const TrainStep::Result st = train_step_.run(step_);
    ++step_;
    const bool last_step_of_run =
        step_ >= plan_.total_steps || (cfg_.stop_after_steps > 0 && tally.steps + 1 >= cfg_.stop_after_steps);
    const bool evaluate = eval_due(last_step_of_run);
    const bool due = state_.due(step_, plan_.total_steps, st.log_step, evaluate);
    if (due) read_step_state(evaluate);
    tally.count_step(st.rows * world(), seconds_since(step_start));
    checkpoints_.poll_write();  // a background write that failed stops the run here
    report_progress(st, tally);
    // Every rank evaluates at the same steps (its sums are collectives);
    // rank 0 alone samples, and nothing of sampling is collective.
    if (observers_.tracer && st.log_step)
      observers_.tracer->flush();  // the marks resolved where the log reads the device anyway
    if (evaluate) run_eval();
    if (sample_due())  // on every rank: at --zero 3 the whole weights are gathered for rank 0's sample
      with_whole_weights([this](const WeightTable& weights) {
        if (observers_.sampler) say(observers_.sampler->sample_line(weights, step_));
      });
    if (cursor_.epoch_done()) cursor_.next_epoch();
    if (cfg_.checkpoint_every > 0 && step_ % cfg_.checkpoint_every == 0) {
      if (observers_.tracer) observers_.tracer->begin_span("checkpoint");
      checkpoints_.write(step_);
      if (observers_.tracer) observers_.tracer->end_span();
    }
    if (observers_.tracer && step_ >= observers_.tracer->window().last)
      observers_.tracer->finish();  // after the window's last step, its evaluation and checkpoint
    // Ranks agree on a stop at the same deterministic points where they
    // read the step state (every step on CPU ranks, at most 50 apart on
    // GPUs): a host collective every step would tie the hosts together.
    if (due && (stop_signal = agreed_stop_signal()) != 0) break;
  }
  return finish(stop_signal, tally);
}

void Trainer::Impl::read_step_state(bool before_eval) {
  {
    // The read waits for the device, which may wait for a peer. Before
    // an evaluation or the end, the step's time includes its device work.
    CollectiveWatch watch(observers_.watchdog, "all-reduce", step_);
    if (before_eval || step_ >= plan_.total_steps) backend_.synchronize();
    state_.read(step_);
  }
  state_.check_bad_steps();
}

void Trainer::Impl::report_progress(const TrainStep::Result& st, RunTally& tally) {
  ProgressSnapshot snap;
  snap.epoch = cursor_.epoch() + 1;
  snap.epochs = plan_.epochs_total;
  snap.step = step_;
  snap.total_steps = plan_.total_steps;
  snap.eta_s = tally.train_s / tally.steps * (plan_.total_steps - step_);
  const StepStatus& status = state_.host();
  if (st.log_step) {
    // read_step_state() read the step state (and this rank's loss) after
    // this step: the scale the step ran with and whether it was skipped.
    snap.loss_scale = status.step_scale;
    snap.skipped = status.last_skipped != 0;
    {
      CollectiveWatch watch(observers_.watchdog, "host all-reduce", step_);
      snap.loss = comm_.allreduce_sum_host(state_.loss()) / world();
    }
    snap.samples_per_s = tally.interval_samples_per_s();
    const AllreduceTimes interval_allreduce = comm_.take_allreduce_times();
    tally.allreduce += interval_allreduce;
    // Replayed steps' all-reduces are not timed: with graphs, no figure (null).
    const double untimed = std::numeric_limits<double>::quiet_NaN();
    snap.allreduce_ms_per_step =
        train_step_.graphs_enabled() ? untimed : 1e3 * interval_allreduce.busy_s / tally.interval_steps;
    const double hidden = train_step_.graphs_enabled() ? untimed : interval_allreduce.hidden_fraction();
    tally.start_interval();
    const CheckpointTimes checkpoint_times = checkpoints_.take_interval_times();
    report_.log_step(snap, st.lr, st.outcome.grad_norm, hidden, checkpoint_times);
  }
  if (is_root() && report_.progress().live_line_due()) {
    // Rank 0's loss and step state as of the last read (every step on
    // CPU ranks, at most 50 steps old on GPUs): a live line must not
    // wait for the device, which may be waiting for a peer.
    snap.loss = state_.loss();
    snap.loss_scale = status.step_scale;
    snap.skipped = status.last_skipped != 0;
    snap.samples_per_s = tally.samples_per_s();
    report_.progress().live_line(snap);
  }
}

TrainSummary Trainer::Impl::finish(int stop_signal, RunTally& tally) {
  // A window the run ended in is written whatever ends it (a signal, bad
  // steps, --stop-after-steps): before anything below may stop the run.
  if (observers_.tracer) {
    observers_.tracer->finish();
    if (is_root() && !observers_.tracer->started())
      say("--trace: no step of --trace-steps " + std::to_string(cfg_.trace_first) + ":" +
          std::to_string(cfg_.trace_last) + " ran in this run; no trace written");
  }
  // The loop may end (--stop-after-steps, a signal) between two reads of
  // the step state: a --max-bad-steps ending reached since the last read
  // must not pass for a finished run (every rank ends here at one step).
  {
    CollectiveWatch watch(observers_.watchdog, "all-reduce", step_);
    state_.read(step_);
  }
  state_.check_bad_steps();
  // A signal since the loop's last agreed check (the loop ended by its step
  // count) stops the run before the final evaluation: every rank is here at
  // the same step, so none skips a collective the others enter.
  if (stop_signal == 0) stop_signal = agreed_stop_signal();
  if (stop_signal != 0) return stopped_by(stop_signal, tally);
  if (step_ < plan_.total_steps)
    say("stopping after " + std::to_string(tally.steps) + " steps (--stop-after-steps) at step " +
        std::to_string(step_) + " of " + std::to_string(plan_.total_steps));
  if (!evaluator_.ran_at(step_)) run_eval();
  checkpoints_.write(step_);  // --async-checkpoint: written while the weights are saved
  if (!cfg_.save_weights_dir.empty()) {
    const std::vector<float> masters = gather_fp32_state(comm_, params_, params_.master_weights_fp32);  // every rank
    if (is_root()) {
      std::string note;
      const SafetensorsDtype dtype =
          dtype_that_holds(model_->parameters(), masters, weights_dtype_named(cfg_.save_weights_dtype), note);
      if (!note.empty()) say(note);
      if (cfg_.weights_format == "hf")
        save_hf_gpt2(cfg_.save_weights_dir, model_->parameters(), masters, cfg_.gpt.n_head,
                     model_token_shape(cfg_).real_vocab, cfg_.tokenizer, dtype);
      else
        save_weights(cfg_.save_weights_dir, model_->parameters(), masters, cfg_.tokenizer, dtype);
      say("weights saved to " + cfg_.save_weights_dir +
          (dtype == SafetensorsDtype::F32 ? std::string() : std::string(" (") + safetensors_dtype_name(dtype) + ")"));
    }
  }
  // The run is done when its last checkpoint is whole: before the summary
  // says so, and before the ranks agree on a late signal (which ends a
  // rank at once from then on).
  checkpoints_.wait_for_write();

  TrainSummary sum = summary_of_run(tally);
  tally.allreduce += comm_.take_allreduce_times();
  sum.allreduce_ms_per_step = tally.steps > 0 ? 1e3 * tally.allreduce.busy_s / tally.steps : 0.0;
  sum.allreduce_hidden_fraction = tally.allreduce.hidden_fraction();
  if (train_step_.graphs_enabled())
    sum.allreduce_ms_per_step = sum.allreduce_hidden_fraction = std::numeric_limits<double>::quiet_NaN();
  report_.summary(sum, state_.host().scale, train_step_.graphs_enabled());
  return finished_despite_signal(sum);
}

TrainSummary Trainer::Impl::summary_of_run(const RunTally& tally) {
  const StepStatus& status = state_.read(step_);
  TrainSummary sum;
  sum.test_loss = evaluator_.last().loss;
  sum.test_accuracy = evaluator_.last().accuracy;
  sum.steps = tally.steps;
  sum.graph_replays = train_step_.graph_replays();
  sum.final_step = step_;
  sum.skipped_steps = status.skipped_total;
  sum.optimizer_steps = status.steps_taken;
  sum.samples_per_s = tally.samples_per_s();
  sum.wall_s = seconds_since(tally.run_start);
  sum.checkpoints = checkpoints_.run_times();
  return sum;
}

int Trainer::Impl::agreed_stop_signal() {
  const int64_t mine = pending_stop_signal();
  if (world() == 1) return static_cast<int>(mine);
  CollectiveWatch watch(observers_.watchdog, "stop-flag all-reduce", step_);
  return static_cast<int>(comm_.allreduce_max_host(mine));
}

TrainSummary Trainer::Impl::finished_despite_signal(TrainSummary sum) {
  // Agreed first: the all-reduce waits for rank 0's final writes, so no rank
  // is in the Finished phase (where a signal ends it at once) while rank 0
  // still writes; one that comes after the agreement ends this rank alone,
  // with nothing left to write, and still sets the status.
  sum.stop_signal = agreed_stop_signal();
  set_stop_signal_phase(StopSignalPhase::Finished);
  if (sum.stop_signal == 0) sum.stop_signal = pending_stop_signal();
  if (sum.stop_signal != 0) report_.finished_despite_signal(sum.stop_signal, step_, checkpoint_named(step_));
  return sum;
}

TrainSummary Trainer::Impl::stopped_by(int signal, const RunTally& tally) {
  checkpoints_.write(step_);
  checkpoints_.wait_for_write();  // the line below says the checkpoint is there
  report_.stopped_line(signal, step_, checkpoint_named(step_));
  TrainSummary sum = summary_of_run(tally);
  sum.stop_signal = signal;
  report_.stopped_record(signal, step_, sum, checkpoint_named(step_));
  return sum;
}

void Trainer::Impl::watch_collectives(CollectiveWatchdog* watchdog) {
  observers_.watchdog = watchdog;
  train_step_.watch_collectives(watchdog);
}

std::vector<lowp16> Trainer::Impl::weights_lowp() {
  std::vector<lowp16> whole;
  with_whole_weights([&](const WeightTable& w) {
    // The table's first tensor sits at offset 0 of a flat buffer of the layout.
    whole.resize(params_.count());
    backend_.copy_to_host(whole.data(), w.at(0), whole.size() * sizeof(lowp16));
  });
  return whole;
}

Trainer::Trainer(const TrainConfig& config, Backend& backend, Communicator& comm, TrainTestData data) {
  // A config built in code is refused as the command line's is, before any part reads it.
  const TrainConfig checked = checked_train_config(config, comm.world_size());
  if (checked.zero_stage > 0 && checked.zero_shard_size > 0 && checked.zero_shard_size != comm.shard_size())
    throw Error("--zero-shard-size " + std::to_string(checked.zero_shard_size) +
                ": the communicator's shard groups are " + std::to_string(comm.shard_size()) +
                " ranks (make it with that size)");
  // The 16-bit buffers are the backend's and the communicator's format: a
  // sum in another format than the kernels' would corrupt every gradient.
  const auto precision_problem = [&](const char* what, Precision made) {
    return std::string("--precision ") + precision_name(checked.precision) + ": the " + what + " was made for " +
           precision_name(made) + " (make it with the config's precision)";
  };
  if (backend.precision() != checked.precision) throw Error(precision_problem("backend", backend.precision()));
  if (comm.world_size() > 1 && comm.precision() != checked.precision)
    throw Error(precision_problem("communicator", comm.precision()));
  // A model that cannot fit is one line before anything is allocated, not
  // an allocation failure (or a swapping machine) part way through building it.
  const size_t parameters = model_parameters(bind_model_to_data(checked, data)).parameter_count();
  const std::string problem = host_memory_problem(checked.zero_stage, comm.shard_size(), comm.world_size(), parameters,
                                                  checked.optimizer == OptimizerKind::AdamW,
                                                  backend.kind() == DeviceKind::Cpu, physical_memory_bytes());
  if (!problem.empty()) throw Error(problem);
  impl_ = std::make_unique<Impl>(checked, backend, comm, std::move(data));
}
Trainer::~Trainer() = default;
void Trainer::prepare() { impl_->prepare(); }
void Trainer::watch_collectives(CollectiveWatchdog* watchdog) { impl_->watch_collectives(watchdog); }
TrainSummary Trainer::run() { return impl_->run(); }
TrainSummary Trainer::evaluate() { return impl_->evaluate_only(); }
BenchTimings Trainer::bench(int64_t warmup_steps, int64_t timed_steps) {
  return impl_->bench(warmup_steps, timed_steps);
}
TrainState Trainer::snapshot() const { return impl_->snapshot(); }
StateBytes Trainer::state_bytes() const { return impl_->held_state_bytes(); }
std::vector<lowp16> Trainer::weights_lowp() const { return impl_->weights_lowp(); }
void Trainer::observe_batches(std::function<void(const uint32_t* indices, int rows)> observer) {
  impl_->observe_batches(std::move(observer));
}
BatchLoaderCounts Trainer::loader_counts() const { return impl_->loader_counts(); }

}  // namespace ddp
