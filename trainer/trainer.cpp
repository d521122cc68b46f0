// trainer.cpp: the loop of trainer.h. Per iteration: load the rank's batch
// (copied to the device one batch ahead, batch_loader.h), FP16 forward, FP32
// loss, scaled FP16 loss gradient, FP16 backward into the flat gradient
// buffer, FP16 all-reduce, unscale/check/clip/SGD on the FP32 masters,
// loss-scale update. Evaluation at each epoch end; metrics,
// progress and checkpoints at their intervals.
#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <limits>
#include <thread>
#include <unistd.h>
#include <utility>

#include "kernels/error.h"
#include "trainer/batch_loader.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_dir.h"
#include "trainer/checkpoint_validation.h"
#include "trainer/distributed_sampler.h"
#include "trainer/evaluator.h"
#include "trainer/gradient_buckets.h"
#include "trainer/json_writer.h"
#include "trainer/mixed_precision_optimizer.h"
#include "trainer/mlp_model.h"
#include "trainer/progress_reporter.h"
#include "trainer/resume_check.h"
#include "trainer/run_outputs.h"
#include "trainer/stop_signal.h"
#include "trainer/weights_io.h"

namespace ddp {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

bool overflow_injected_at(const TrainConfig& c, int rank, int64_t step_1based) {
  if (rank != c.inject_overflow_rank) return false;
  if (c.inject_overflow_every > 0 && step_1based % c.inject_overflow_every == 0) return true;
  return std::find(c.inject_overflow_steps.begin(), c.inject_overflow_steps.end(), step_1based) !=
         c.inject_overflow_steps.end();
}

// How often (in steps) the host reads the device-resident step state when
// nothing else asks for it (log steps, checkpoints and the end do): bounds
// how long a run goes on after --max-bad-steps was reached. On CPU the
// state is host memory and is read every step.
constexpr int64_t kStatusPollSteps = 50;

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction);
  return buf;
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
  Buffer<StepStatus> status_dev;  // (1) the step state, in the backend's memory (step_status.h)
  StepStatus status{};            // the host's copy as of the last read_status()
  int64_t status_read_at = -1;    // step of that copy
  float status_loss = 0.0f;       // this rank's loss_mean, read with it
  DistributedSampler sampler;
  BatchLoader loader;
  Evaluator evaluator;
  LrSchedule schedule;
  ProgressReporter progress;
  Buffer<float> loss_mean;  // (1) this step's local mean loss
  std::unique_ptr<MetricsFile> metrics;
  std::vector<GradientBucket> buckets;  // all-reduce units, in the order backward completes them
  CollectiveWatchdog* watchdog = nullptr;  // not owned; null: collectives are not watched

  bool graph_mode = false;                  // --cuda-graph on a backend and transport that can capture
  int capture = -1;                         // the backend's recording of the step, once made
  struct GraphInput {                       // the captured step's batch, copied in before each replay
    Buffer<half16> features;
    Buffer<int32_t> labels;
    Buffer<float> targets;
  } graph_input;
  int64_t eager_full_steps = 0, graph_replays = 0;
  int64_t step = 0, epoch = 0, epoch_offset = 0;
  int64_t steps_per_epoch = 0, total_steps = 0, epochs_total = 0;
  int64_t last_eval_step = -1, last_checkpoint_step = -1;
  // This rank's order for indices_epoch (the current epoch) and for
  // next_indices_epoch (the next one, which the prefetch at an epoch's last
  // step reads first).
  std::vector<uint32_t> indices, next_indices;
  int64_t indices_epoch = -1, next_indices_epoch = -1;
  std::function<void(const uint32_t*, int)> batch_observer;  // test hook; may be empty
  EvalResult last_eval;
  bool prepared = false;
  bool resumed = false;    // the state came from a checkpoint
  uint64_t run_id = 0;     // lineage (train_state.h): drawn fresh, or the checkpoint's

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
        status_dev(b, 1),
        sampler(data.train.count, m.rank(), m.world_size(), c.seed, c.shuffle, c.drop_last),
        loader(b, data.train, static_cast<int>(cfg.batch_size)),
        evaluator(b, data.test, static_cast<int>(cfg.batch_size)),
        progress(m.rank() == 0),
        loss_mean(b, 1),
        buckets(plan_gradient_buckets(layout, static_cast<size_t>(cfg.bucket_mb * (1 << 20)),
                                      static_cast<size_t>(cfg.first_bucket_mb * (1 << 20)))) {
    const int64_t per_rank = static_cast<int64_t>(sampler.samples_per_rank());
    const int64_t per_step = samples_per_rank_step();
    steps_per_epoch = cfg.drop_last ? per_rank / per_step : (per_rank + per_step - 1) / per_step;
    if (steps_per_epoch == 0)
      throw Error("batch " + std::to_string(cfg.batch_size) + " x --grad-accum " + std::to_string(cfg.grad_accum) +
                  " with --drop-last leaves no full step of the " + std::to_string(per_rank) + " samples per rank");
    // Bounded as --steps is (options_check.cpp), so step counts never overflow.
    if (cfg.steps == 0 && (__builtin_mul_overflow(cfg.epochs, steps_per_epoch, &total_steps) ||
                           total_steps > kMaxTrainSteps))
      throw Error("--epochs " + std::to_string(cfg.epochs) + " x " + std::to_string(steps_per_epoch) +
                  " steps per epoch is more than 2^40 steps");
    if (cfg.steps > 0) total_steps = cfg.steps;
    epochs_total = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
    schedule.kind = cfg.lr_schedule;
    schedule.base_lr = cfg.lr;
    schedule.total_steps = total_steps;
    schedule.warmup_steps = cfg.warmup_steps;
    schedule.step_size = cfg.lr_step_size;
    schedule.gamma = cfg.lr_gamma;
    if (cfg.cuda_graph) {
      if (!backend.supports_capture())
        throw Error("--cuda-graph needs a CUDA device (this run uses " + backend.description() + ")");
      if (!comm.supports_capture())
        throw Error("--cuda-graph: " + comm.capture_unsupported_reason());
      graph_mode = true;
      const size_t rows = static_cast<size_t>(cfg.batch_size);
      graph_input.features = Buffer<half16>(b, rows * data.train.features);
      if (data.train.is_classification()) graph_input.labels = Buffer<int32_t>(b, rows);
      else graph_input.targets = Buffer<float>(b, rows * data.train.target_dim);
    }
    const LossScalerState initial = LossScaler(cfg.loss_scaler).state();
    status.scale = initial.scale;
    status.growth_tracker = initial.growth_tracker;
    status.hysteresis_left = initial.hysteresis_left;
  }

  // The host's copy of the step state (and this rank's last loss, for live
  // lines), read now: waits for the device.
  const StepStatus& read_status() {
    if (status_read_at != step) {
      backend.copy_to_host(&status, status_dev.data(), sizeof(StepStatus));
      backend.copy_to_host(&status_loss, loss_mean.data(), sizeof(status_loss));
      status_read_at = step;
    }
    return status;
  }

  // Captured steps hold NCCL work: they go before the communicator does
  // (the Trainer is destroyed first, being declared after it).
  ~Impl() { backend.release_captures(); }

  int world() const { return comm.world_size(); }
  bool is_root() const { return comm.rank() == 0; }
  int64_t samples_per_rank_step() const { return cfg.batch_size * cfg.grad_accum; }
  int64_t global_batch() const { return samples_per_rank_step() * world(); }

  void say(const std::string& line) { progress.permanent(line); }

  std::string resolve_resume_path() {
    if (!cfg.resume_path.empty()) return cfg.resume_path;
    if (cfg.checkpoint_dir.empty()) throw Error("--resume without a PATH needs --checkpoint-dir");
    if (!std::filesystem::is_directory(cfg.checkpoint_dir)) {
      say("resume: " + cfg.checkpoint_dir + " does not exist yet; starting from scratch");
      return "";
    }
    const CheckpointScan scan = find_newest_valid_checkpoint(cfg.checkpoint_dir);
    for (const auto& [path, why] : scan.skipped) say("resume: skipping " + path + ": " + why);
    if (scan.newest_valid.empty()) {
      if (scan.candidates > 0)
        throw Error("--resume: " + cfg.checkpoint_dir + " holds " + std::to_string(scan.candidates) +
                    " checkpoint(s) and none is valid");
      say("resume: no checkpoint in " + cfg.checkpoint_dir + "; starting from scratch");
    }
    return scan.newest_valid;
  }

  // What resume_check.h needs to know about this run.
  ResumeTarget resume_target() const {
    ResumeTarget t;
    t.world_size = world();
    t.train_samples = data.train.count;
    t.epoch_samples = static_cast<int64_t>(sampler.samples_per_rank()) * world();
    t.global_batch = global_batch();
    t.total_steps = total_steps;
    t.loss_scaler = cfg.loss_scaler;
    t.given_flags = cfg.given_flags;
    return t;
  }

  void restore(const TrainState& s, const std::string& path) {
    validate_checkpoint_contents(s, path);
    check_checkpoint_compatible(s, cfg.layer_widths, cfg.activation_name, cfg.loss_name, path);
    if (s.master_weights_fp32.size() != params.count() || s.momentum_fp32.size() != params.count())
      throw Error(path + ": parameter count does not match the model");
    const ResumeTarget target = resume_target();
    std::vector<std::string> notes = check_resume_fits(s, target, path);
    const LossScalerState scaler = resumed_scaler_state(s, target, notes);
    params.set_master_weights(s.master_weights_fp32);
    params.momentum_fp32.upload(s.momentum_fp32);
    status.momentum_initialized = s.momentum_initialized ? 1 : 0;
    status.scale = scaler.scale;
    status.growth_tracker = scaler.growth_tracker;
    status.hysteresis_left = scaler.hysteresis_left;
    for (const std::string& line : notes) say(line);
    resumed = true;
    run_id = s.run_id;
    status.steps_done = s.step;
    status.skipped_total = s.skipped_steps;
    step = s.step, epoch = s.epoch, epoch_offset = s.epoch_sample_offset;
    indices_epoch = next_indices_epoch = -1;  // the seed, and with it the order, may change below
    if (s.seed != cfg.seed) {
      say("resume: the checkpoint was made with --seed " + std::to_string(s.seed) + "; using it for the data order");
      cfg.seed = s.seed;
      sampler = DistributedSampler(data.train.count, comm.rank(), world(), cfg.seed, cfg.shuffle, cfg.drop_last);
    }
    say("resumed from " + path + " at step " + std::to_string(step) + " (epoch " + std::to_string(epoch + 1) + ")");
  }

  void prepare() {
    std::string resume_from;
    if (cfg.resume) resume_from = resolve_resume_path();
    if (!resume_from.empty()) {
      restore(read_checkpoint(resume_from), resume_from);
    } else {
      std::vector<float> init = cfg.init_weights_dir.empty() ? init_linear_parameters(layout, cfg.seed)
                                                             : load_weights_npy(cfg.init_weights_dir, layout);
      params.set_master_weights(init);
      if (!cfg.init_weights_dir.empty()) say("initial weights from " + cfg.init_weights_dir);
    }
    // A lineage for a run from scratch, or for one resumed from a
    // checkpoint of an earlier build that recorded none.
    if (run_id == 0) run_id = fresh_run_id();
    // Every rank starts from rank 0's parameters, whatever its seed.
    {
      CollectiveWatch watch(watchdog, "broadcast", step + 1);
      comm.broadcast_bytes(params.master_weights_fp32.data(), params.master_weights_fp32.size_bytes(), 0);
      comm.broadcast_bytes(params.momentum_fp32.data(), params.momentum_fp32.size_bytes(), 0);
      comm.broadcast_bytes(&run_id, sizeof run_id, 0);
    }
    if (is_root()) prepare_outputs();
    backend.cast_fp32_to_fp16(params.master_weights_fp32.data(), params.weights_fp16.data(), params.count());
    backend.copy_to_device(status_dev.data(), &status, sizeof(StepStatus));
    status_read_at = step;
    prepared = true;
  }

  static uint64_t fresh_run_id() {
    std::random_device device;
    std::seed_seq seq{device(), device(), static_cast<unsigned>(::getpid()),
                      static_cast<unsigned>(Clock::now().time_since_epoch().count())};
    std::mt19937_64 rng(seq);
    uint64_t id = 0;
    while (id == 0) id = rng();
    return id;
  }

  // Rank 0 alone writes: every output is checked, created or opened here,
  // before the first step (run_outputs.h), and the metrics file is opened.
  void prepare_outputs() {
    std::vector<std::string> notes;
    if (!cfg.checkpoint_dir.empty()) {
      const int64_t last_step = cfg.stop_after_steps > 0 ? std::min(total_steps, step + cfg.stop_after_steps) : total_steps;
      notes = check_checkpoint_dir_for_run(cfg.checkpoint_dir, resumed, step, std::max(last_step, step), run_id);
    }
    for (const std::string& line : check_run_outputs(cfg, cfg.resume)) notes.push_back(line);
    for (const std::string& line : notes) say(line);
    if (!cfg.metrics_path.empty()) metrics = std::make_unique<MetricsFile>(cfg.metrics_path, cfg.resume);
  }

  TrainState snapshot() {
    read_status();
    TrainState s;
    s.layer_widths = cfg.layer_widths;
    s.activation = cfg.activation_name;
    s.loss = cfg.loss_name;
    s.master_weights_fp32 = params.master_weights_fp32.download();
    s.momentum_fp32 = params.momentum_fp32.download();
    s.momentum_initialized = status.momentum_initialized != 0;
    s.scaler.scale = status.scale;
    s.scaler.growth_tracker = status.growth_tracker;
    s.scaler.hysteresis_left = status.hysteresis_left;
    s.step = step, s.epoch = epoch, s.epoch_sample_offset = epoch_offset, s.skipped_steps = status.skipped_total;
    s.seed = cfg.seed;
    s.run_id = run_id;
    s.train_samples = data.train.count;
    s.global_batch = global_batch();
    return s;
  }

  std::string checkpoint_path(int64_t at_step) const {
    return (std::filesystem::path(cfg.checkpoint_dir) / checkpoint_file_name(at_step)).string();
  }

  void write_checkpoint() {
    if (cfg.checkpoint_dir.empty() || last_checkpoint_step == step) return;
    TrainState s = snapshot();  // every rank downloads; only rank 0 writes
    last_checkpoint_step = step;
    if (!is_root()) return;
    std::error_code ec;
    std::filesystem::create_directories(cfg.checkpoint_dir, ec);
    if (ec) throw Error("--checkpoint-dir: cannot create " + cfg.checkpoint_dir + ": " + ec.message());
    write_checkpoint_atomic(checkpoint_path(step), s);
    prune_checkpoints(cfg.checkpoint_dir, cfg.keep_checkpoints, run_id, cfg.layer_widths, checkpoint_path(step));
  }

  void run_eval() {
    {
      CollectiveWatch watch(watchdog, "evaluation", step);  // its sums wait for the slowest rank's forward passes
      last_eval = evaluator.run(comm, model, cfg.loss, params.weights_fp16.data());
    }
    last_eval_step = step;
    char loss_text[32];
    std::snprintf(loss_text, sizeof loss_text, "%.4f", last_eval.loss);
    std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs_total) + " (step " +
                       std::to_string(step) + "): test loss " + loss_text;
    if (cfg.loss == LossKind::SoftmaxCrossEntropy)
      line += ", test accuracy " + percent(last_eval.accuracy) + " (" + std::to_string(last_eval.correct) + "/" +
              std::to_string(last_eval.samples) + ")";
    say(line);
    if (metrics) {
      JsonRecord r;
      r.add("event", "eval").add("step", step).add("epoch", epoch + 1).add("test_loss", last_eval.loss);
      r.add("test_accuracy", last_eval.accuracy);
      metrics->write(r);
    }
  }

  // A test hook: one +Inf in the first gradient element, as an FP16
  // overflow in backward would leave it; the all-reduce carries it to every rank.
  void inject_overflow() {
    const half16 inf{0x7C00};
    backend.copy_to_device(params.grads_fp16.data(), &inf, sizeof inf);
  }

  void banner() {
    std::string widths;
    for (size_t i = 0; i < cfg.layer_widths.size(); ++i)
      widths += (i ? "-" : "") + std::to_string(cfg.layer_widths[i]);
    say("model: MLP " + widths + " " + cfg.activation_name + ", loss " + cfg.loss_name + ", " +
        std::to_string(params.count()) + " parameters");
    say("data: train " + std::to_string(data.train.count) + " samples (" + data.train.source + "), test " +
        std::to_string(data.test.count));
    std::string accum;
    if (cfg.grad_accum > 1) accum = " x " + std::to_string(cfg.grad_accum) + " micro-batches";
    if (cfg.grad_predivide != 1.0) accum += ", gradients predivided by " + json_number(cfg.grad_predivide);
    say("world " + std::to_string(world()) + " (" + comm.name() + "), batch " + std::to_string(cfg.batch_size) +
        " per rank" + accum + ", global batch " + std::to_string(global_batch()) + "; " +
        std::to_string(total_steps) + " steps (" + std::to_string(steps_per_epoch) + " per epoch)");
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
    stall_if_asked();
    // Where the host may block in a step (the batch upload, the optimizer's
    // reads when clipping or logging, CPU ranks' wait for the sums) it is
    // waiting, directly or through the device, for the step's collectives.
    CollectiveWatch watch(watchdog, "all-reduce", step + 1);
    const StepSlice now = slice_at(epoch, epoch_offset);
    const std::vector<uint32_t>& order = order_for(epoch);
    const int64_t step_rows = now.step_rows, micro_batches = now.micro_batches;
    StepResult r;
    r.rows = step_rows;
    r.lr = schedule.lr_at(step);
    r.log_step = (step + 1) % cfg.log_every == 0 || step + 1 == total_steps;
    // Each micro-batch's loss is a mean over its rows; the step's gradient
    // is their mean (1/micro_batches, as `loss / K` in PyTorch), divided by
    // --grad-predivide before the all-reduce. All of it rides on the scale
    // of the loss gradient, so backward needs no extra pass. The scale lives
    // on the device: prepare derives the step's scalars there (queued, no wait).
    backend.step_status_prepare(status_dev.data(), static_cast<double>(micro_batches) * cfg.grad_predivide,
                                world() / cfg.grad_predivide, static_cast<float>(r.lr));
    const bool replayed = graph_eligible(micro_batches, step_rows, r.log_step);
    for (int64_t micro = 0; micro < micro_batches; ++micro) {
      const uint32_t* batch_indices = order.data() + micro_first(now, micro);
      const int rows = micro_rows(now, micro);
      if (batch_observer) batch_observer(batch_indices, rows);
      const DeviceBatch batch = loader.load(batch_indices, rows);  // outside any capture
      if (replayed) replay_step(batch);
      else micro_batch_pass(batch, rows, micro, micro_batches);
      // With this micro-batch's work queued (on a GPU the device is busy
      // with it), gather the next one and queue its copy.
      if (cfg.prefetch_batches) prefetch_after(now, micro);
    }
    if (!replayed) {
      r.outcome = reduce_and_update(r.log_step);
      // Only a step of the captured shape and kind (one full micro-batch,
      // the optimizer without host reads, no test hook) makes the
      // allocations and plans the capture's kernels need: a log step's
      // optimizer takes another route.
      if (graph_shaped(micro_batches, step_rows, r.log_step)) ++eager_full_steps;
    }
    ++step;
    epoch_offset += step_rows * world();
    return r;
  }

  // Forward, loss and backward of one micro-batch (`batch`, in an upload slot).
  // Only the last micro-batch's backward finishes gradients (no_sync before
  // it): its finished buckets start their all-reduces at once.
  void micro_batch_pass(const DeviceBatch& batch, int rows, int64_t micro, int64_t micro_batches) {
    const ScalarArg backward_scale = ScalarArg::at(&status_dev.data()->backward_scale);
    const half16* out = model.forward(batch.features_fp16, rows, params.weights_fp16.data());
    const int classes = model.output_width();
    if (cfg.loss == LossKind::SoftmaxCrossEntropy) {
      backend.softmax_xent_forward(out, batch.labels, rows, classes, loss_mean.data(), nullptr);
      backend.softmax_xent_backward(out, batch.labels, rows, classes, backward_scale, model.output_grad());
    } else {
      backend.mse_forward(out, batch.targets_fp32, rows, classes, loss_mean.data());
      backend.mse_backward(out, batch.targets_fp32, rows, classes, backward_scale, model.output_grad());
    }
    const bool last = micro + 1 == micro_batches;
    model.backward(rows, params.weights_fp16.data(), params.grads_fp16.data(), /*accumulate=*/micro > 0,
                   last ? std::function<void(int)>([this](int layer) { layer_gradients_done(layer); }) : nullptr);
  }

  // The sums, then the optimizer step and the loss-scale update. The sum
  // over ranks was predivided by F: what is left to divide is N/F (prepared
  // as the step's 1/(S N/F)).
  StepOutcome reduce_and_update(bool log_step) {
    comm.wait_allreduces();
    const StepOutcome outcome = optimizer.step(status_dev.data(), log_step);
    backend.step_status_finish(scale_rule, status_dev.data());
    return outcome;
  }

  // --cuda-graph: a step is replayed from a capture when its shapes are the
  // steady ones (one full micro-batch) and nothing in it needs the host (no
  // logged norm or clipping, no test hook), after one eager step of that
  // shape has made every allocation and GEMM plan. Everything per step that
  // a capture would freeze (scale, lr, skip, momentum start) is read from
  // the step state; the batch is uploaded before the replay.
  bool graph_eligible(int64_t micro_batches, int64_t step_rows, bool log_step) const {
    return graph_mode && graph_shaped(micro_batches, step_rows, log_step) && eager_full_steps > 0;
  }
  bool graph_shaped(int64_t micro_batches, int64_t step_rows, bool log_step) const {
    return micro_batches == 1 && step_rows == cfg.batch_size && !optimizer.needs_host(log_step) &&
           !overflow_injected_at(cfg, cfg.inject_overflow_rank, step + 1);
  }

  // The batch is copied (device to device, stream-ordered after its upload)
  // into the graph's own input buffers, so there is one capture, made at
  // the same step on every rank: NCCL requires a collective's capture to be
  // uniform over the ranks, and which upload slot a rank's batch sits in is
  // the loader's business.
  void replay_step(const DeviceBatch& batch) {
    const size_t rows = static_cast<size_t>(batch.rows);
    backend.copy_on_device(graph_input.features.data(), batch.features_fp16,
                           rows * data.train.features * sizeof(half16));
    if (batch.labels) backend.copy_on_device(graph_input.labels.data(), batch.labels, rows * sizeof(int32_t));
    if (batch.targets_fp32)
      backend.copy_on_device(graph_input.targets.data(), batch.targets_fp32,
                             rows * data.train.target_dim * sizeof(float));
    if (capture < 0) {
      DeviceBatch fixed;
      fixed.features_fp16 = graph_input.features.data();
      fixed.labels = batch.labels ? graph_input.labels.data() : nullptr;
      fixed.targets_fp32 = batch.targets_fp32 ? graph_input.targets.data() : nullptr;
      fixed.rows = batch.rows;
      backend.begin_capture();
      comm.set_capturing(true);
      try {
        micro_batch_pass(fixed, batch.rows, 0, 1);
        reduce_and_update(false);
      } catch (...) {
        comm.set_capturing(false);
        try { backend.end_capture(); } catch (...) {}  // leave capture mode; the first error is the one to report
        throw;
      }
      comm.set_capturing(false);
      capture = backend.end_capture();
      say("--cuda-graph: captured the training step at step " + std::to_string(step + 1) +
          "; replaying it (log steps, short or accumulated steps run eagerly)");
    }
    backend.replay(capture);
    ++graph_replays;
  }

  // Where one step's samples lie: positions [local_pos, local_pos +
  // step_rows) of this rank's order for `epoch`, in micro_batches
  // consecutive slices of the batch size. The last step of an epoch may have
  // fewer rows (and a shorter last slice).
  struct StepSlice {
    int64_t epoch = 0, epoch_offset = 0, local_pos = 0, step_rows = 0, micro_batches = 0;
  };

  StepSlice slice_at(int64_t at_epoch, int64_t at_offset) const {
    const int64_t per_rank = static_cast<int64_t>(sampler.samples_per_rank());
    StepSlice s;
    s.epoch = at_epoch, s.epoch_offset = at_offset;
    s.local_pos = at_offset / world();
    s.step_rows = std::min<int64_t>(samples_per_rank_step(), per_rank - s.local_pos);
    s.micro_batches = (s.step_rows + cfg.batch_size - 1) / cfg.batch_size;
    return s;
  }
  int64_t micro_first(const StepSlice& s, int64_t micro) const { return s.local_pos + micro * cfg.batch_size; }
  int micro_rows(const StepSlice& s, int64_t micro) const {
    return static_cast<int>(std::min<int64_t>(cfg.batch_size, s.local_pos + s.step_rows - micro_first(s, micro)));
  }

  // The step after `s`, moving to the next epoch as run() and bench() do
  // (epoch_done after the step: next epoch, offset 0).
  StepSlice slice_after(const StepSlice& s) const {
    const int64_t offset = s.epoch_offset + s.step_rows * world();
    return epoch_done_at(offset) ? slice_at(s.epoch + 1, 0) : slice_at(s.epoch, offset);
  }

  // This rank's order for `at_epoch`, the current or the next epoch. A
  // reference to the current epoch's stays valid until a step starts in
  // another epoch.
  const std::vector<uint32_t>& order_for(int64_t at_epoch) {
    if (indices_epoch == at_epoch) return indices;
    if (next_indices_epoch != at_epoch) next_indices = sampler.rank_indices(at_epoch), next_indices_epoch = at_epoch;
    if (at_epoch != epoch) return next_indices;
    std::swap(indices, next_indices);
    std::swap(indices_epoch, next_indices_epoch);
    return indices;
  }

  // Starts the copy of the batch that follows micro-batch `micro` of step
  // `s`: the step's next micro-batch, or the next step's first (in the next
  // epoch's order after an epoch's last step): what the next load() will
  // ask for. Where there is no next load (the run's last step, a stop) the
  // copy is wasted; a load of other rows would still get exactly those rows
  // (BatchLoader::load), so prefetching never changes a result.
  void prefetch_after(const StepSlice& s, int64_t micro) {
    if (micro + 1 < s.micro_batches) {
      loader.prefetch(order_for(s.epoch).data() + micro_first(s, micro + 1), micro_rows(s, micro + 1));
      return;
    }
    const StepSlice next = slice_after(s);
    loader.prefetch(order_for(next.epoch).data() + micro_first(next, 0), micro_rows(next, 0));
  }

  // Test hook (--stall-rank/--stall-at-step): this rank stops taking part
  // before the step's collectives, as a hung process would; its peers wait.
  void stall_if_asked() {
    if (cfg.stall_at_step <= 0 || cfg.stall_at_step != step + 1 || comm.rank() != cfg.stall_rank) return;
    std::fprintf(stderr, "ddp_train: rank %d stalls before step %lld (--stall-at-step)\n", comm.rank(),
                 static_cast<long long>(step + 1));
    std::fflush(stderr);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }

  // Whether the host reads the step state after this step. Every rank
  // decides alike (never on timing), so every rank sees a --max-bad-steps
  // ending at the same step.
  bool status_due(const StepResult& st) const {
    return backend.kind() == DeviceKind::Cpu || st.log_step || step % kStatusPollSteps == 0 || epoch_done() ||
           (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0) || step >= total_steps;
  }

  // The device counts consecutive skipped steps and records the step where
  // the run reached --max-bad-steps; seen at a read, it ends the run on
  // every rank (the skip decision is global, and so is the read schedule).
  void check_bad_steps() {
    if (status.giveup_step == 0) return;
    const int64_t n = cfg.max_bad_steps, last = status.giveup_step;
    char scale_text[32];
    std::snprintf(scale_text, sizeof scale_text, "%g", status.giveup_scale);
    throw AgreedError(std::to_string(n) + " consecutive steps (" + std::to_string(last - n + 1) +
                      " to " + std::to_string(last) + ") were skipped for non-finite gradients, the last at loss " +
                      "scale " + scale_text + "; giving up (--max-bad-steps " + std::to_string(cfg.max_bad_steps) +
                      ")");
  }

  // The stop signal all ranks act on at this step boundary: the largest any
  // of them received (a host all-reduce; a world of one reads its own).
  int agreed_stop_signal() {
    const int64_t mine = pending_stop_signal();
    if (world() == 1) return static_cast<int>(mine);
    CollectiveWatch watch(watchdog, "stop-flag all-reduce", step);
    return static_cast<int>(comm.allreduce_max_host(mine));
  }

  // Starts the all-reduce of the bucket that layer completes, if any.
  void layer_gradients_done(int layer) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].lowest_layer != layer) continue;
      // The overflow test hook lands in the first element, in bucket 0.
      if (b == 0 && overflow_injected_at(cfg, comm.rank(), step + 1)) inject_overflow();
      comm.start_allreduce_sum_fp16(params.grads_fp16.data() + buckets[b].offset, buckets[b].count);
    }
  }

  bool epoch_done() const { return epoch_done_at(epoch_offset); }
  bool epoch_done_at(int64_t at_offset) const {
    const int64_t per_rank = static_cast<int64_t>(sampler.samples_per_rank());
    const int64_t used = at_offset / world();
    return used >= per_rank || (cfg.drop_last && used + samples_per_rank_step() > per_rank);
  }

  BenchTimings bench(int64_t warmup_steps, int64_t timed_steps) {
    DDP_REQUIRE(prepared, "Trainer::bench before prepare");
    BenchTimings t;
    t.global_samples_per_step = global_batch();
    auto one_step = [this] {
      train_step();
      if (epoch_done()) ++epoch, epoch_offset = 0;
    };
    for (int64_t i = 0; i < warmup_steps; ++i) one_step();
    backend.synchronize();
    {
      CollectiveWatch watch(watchdog, "barrier", step);
      comm.barrier();
    }
    comm.take_allreduce_times();
    const int64_t replays_before = graph_replays;
    for (int64_t i = 0; i < timed_steps; ++i) {
      const auto start = Clock::now();
      one_step();
      backend.synchronize();
      t.step_s.push_back(seconds_since(start));
    }
    t.allreduce = comm.take_allreduce_times();
    t.graph_replays = graph_replays - replays_before;
    return t;
  }

  // The summary fields every ending of run() shares (finished or stopped).
  TrainSummary summary_of_run(int64_t steps_this_run, int64_t samples_this_run, double train_s,
                              Clock::time_point run_start) {
    read_status();
    TrainSummary sum;
    sum.test_loss = last_eval.loss;
    sum.test_accuracy = last_eval.accuracy;
    sum.steps = steps_this_run;
    sum.graph_replays = graph_replays;
    sum.final_step = step;
    sum.skipped_steps = status.skipped_total;
    sum.samples_per_s = samples_this_run / std::max(train_s, 1e-9);
    sum.wall_s = seconds_since(run_start);
    return sum;
  }

  TrainSummary run() {
    DDP_REQUIRE(prepared, "Trainer::run before prepare");
    banner();
    const auto run_start = Clock::now();
    double train_s = 0.0;
    int64_t steps_this_run = 0, samples_this_run = 0;
    auto interval_start = Clock::now();
    int64_t interval_samples = 0, interval_steps = 0;
    AllreduceTimes allreduce;  // this run's, summed at log steps
    // From here a signal only asks for a stop at the next agreed point (see
    // stop_signal.h); until here it ended the process at once.
    set_stop_signal_phase(StopSignalPhase::Training);
    int stop_signal = 0;

    while (step < total_steps && !(cfg.stop_after_steps > 0 && steps_this_run >= cfg.stop_after_steps)) {
      const auto step_start = Clock::now();
      const StepResult st = train_step();
      const bool due = status_due(st);
      if (due) {
        {
          // The read waits for the device, which may wait for a peer. Before
          // an evaluation or the end, the step's time includes its device work.
          CollectiveWatch watch(watchdog, "all-reduce", step);
          if (epoch_done() || step >= total_steps) backend.synchronize();
          read_status();
        }
        check_bad_steps();
      }
      const StepOutcome& outcome = st.outcome;
      const int64_t step_rows = st.rows;
      const double lr = st.lr;
      const bool log_step = st.log_step;
      ++steps_this_run;
      samples_this_run += step_rows * world();
      interval_samples += step_rows * world();
      ++interval_steps;
      train_s += seconds_since(step_start);

      ProgressSnapshot snap;
      snap.epoch = epoch + 1, snap.epochs = epochs_total, snap.step = step, snap.total_steps = total_steps;
      snap.eta_s = train_s / steps_this_run * (total_steps - step);
      if (log_step) {
        // status_due() read the step state (and this rank's loss) after this
        // step: the scale the step ran with and whether it was skipped.
        snap.loss_scale = status.step_scale, snap.skipped = status.last_skipped != 0;
        {
          CollectiveWatch watch(watchdog, "host all-reduce", step);
          snap.loss = comm.allreduce_sum_host(status_loss) / world();
        }
        snap.samples_per_s = interval_samples / std::max(seconds_since(interval_start), 1e-9);
        const AllreduceTimes interval_allreduce = comm.take_allreduce_times();
        allreduce += interval_allreduce;
        // Replayed steps' all-reduces are not timed: with graphs, no figure (null).
        const double untimed = std::numeric_limits<double>::quiet_NaN();
        snap.allreduce_ms_per_step = graph_mode ? untimed : 1e3 * interval_allreduce.busy_s / interval_steps;
        interval_start = Clock::now(), interval_samples = 0, interval_steps = 0;
        progress.log_line(snap);
        if (metrics) {
          JsonRecord r;
          r.add("event", "step").add("step", step).add("epoch", epoch + 1).add("loss", snap.loss);
          r.add("loss_scale", snap.loss_scale).add("skipped", snap.skipped).add("lr", lr);
          r.add("grad_norm", outcome.grad_norm).add("samples_per_s", snap.samples_per_s);
          r.add("allreduce_ms_per_step", snap.allreduce_ms_per_step);
          r.add("allreduce_hidden_fraction", graph_mode ? untimed : interval_allreduce.hidden_fraction());
          metrics->write(r);
        }
      }
      if (is_root() && progress.live_line_due()) {
        // Rank 0's loss and step state as of the last read (every step on
        // CPU ranks, at most 50 steps old on GPUs): a live line must not
        // wait for the device, which may be waiting for a peer.
        snap.loss = status_loss;
        snap.loss_scale = status.step_scale, snap.skipped = status.last_skipped != 0;
        snap.samples_per_s = samples_this_run / std::max(train_s, 1e-9);
        progress.live_line(snap);
      }

      if (epoch_done()) {
        run_eval();
        ++epoch, epoch_offset = 0;
      }
      if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0) write_checkpoint();
      // Ranks agree on a stop at the same deterministic points where they
      // read the step state (every step on CPU ranks, at most 50 apart on
      // GPUs): a host collective every step would tie the hosts together.
      if (due && (stop_signal = agreed_stop_signal()) != 0) break;
    }
    // The loop may end (--stop-after-steps, a signal) between two reads of
    // the step state: a --max-bad-steps ending reached since the last read
    // must not pass for a finished run (every rank ends here at one step).
    {
      CollectiveWatch watch(watchdog, "all-reduce", step);
      read_status();
    }
    check_bad_steps();
    // A signal since the loop's last agreed check (the loop ended by its step
    // count) stops the run before the final evaluation: every rank is here at
    // the same step, so none skips a collective the others enter.
    if (stop_signal == 0) stop_signal = agreed_stop_signal();
    if (stop_signal != 0) return stopped_by(stop_signal, steps_this_run, samples_this_run, train_s, run_start);
    if (step < total_steps) say("stopping after " + std::to_string(steps_this_run) + " steps (--stop-after-steps) at step " + std::to_string(step) + " of " + std::to_string(total_steps));
    if (last_eval_step != step) run_eval();
    write_checkpoint();
    if (is_root() && !cfg.save_weights_dir.empty()) {
      save_weights_npy(cfg.save_weights_dir, layout, params.master_weights_fp32.download());
      say("weights saved to " + cfg.save_weights_dir);
    }

    TrainSummary sum = summary_of_run(steps_this_run, samples_this_run, train_s, run_start);
    allreduce += comm.take_allreduce_times();
    sum.allreduce_ms_per_step = steps_this_run > 0 ? 1e3 * allreduce.busy_s / steps_this_run : 0.0;
    sum.allreduce_hidden_fraction = allreduce.hidden_fraction();
    if (graph_mode) sum.allreduce_ms_per_step = sum.allreduce_hidden_fraction = std::numeric_limits<double>::quiet_NaN();
    std::string line = "done: " + std::to_string(sum.steps) + " steps (" + std::to_string(status.skipped_total) +
                       " skipped in total) in " + format_duration(sum.wall_s) + ", " +
                       std::to_string(static_cast<int64_t>(sum.samples_per_s)) + " samples/s over " +
                       std::to_string(world()) + " rank(s), global batch " + std::to_string(global_batch());
    if (world() > 1 && !graph_mode) {
      char comm_text[128];
      std::snprintf(comm_text, sizeof comm_text, ", all-reduce %.2f ms/step (%.0f%% hidden behind backward)",
                    sum.allreduce_ms_per_step, 100.0 * sum.allreduce_hidden_fraction);
      line += comm_text;
    }
    if (graph_mode)
      line += "; " + std::to_string(graph_replays) + " steps replayed from a CUDA graph (all-reduce time not measured)";
    if (cfg.loss == LossKind::SoftmaxCrossEntropy) line += "; final test accuracy " + percent(sum.test_accuracy);
    char tail[96];
    std::snprintf(tail, sizeof tail, ", test loss %.4f; final loss scale %g", sum.test_loss, status.scale);
    line += tail;
    say(line);
    if (metrics) {
      JsonRecord r;
      r.add("event", "summary").add("test_accuracy", sum.test_accuracy).add("test_loss", sum.test_loss);
      // steps: the global step reached (continues across resumes); the
      // throughput figures are this run's (steps_this_run of them).
      r.add("steps", sum.final_step).add("steps_this_run", sum.steps).add("skipped_steps", sum.skipped_steps);
      r.add("samples_per_s", sum.samples_per_s);
      r.add("wall_s", sum.wall_s).add("world_size", static_cast<int64_t>(world()));
      r.add("global_batch", global_batch()).add("batch_per_rank", cfg.batch_size);
      r.add("grad_accum", cfg.grad_accum).add("loss_scale", status.scale);
      r.add("allreduce_ms_per_step", sum.allreduce_ms_per_step);
      r.add("allreduce_hidden_fraction", sum.allreduce_hidden_fraction);
      r.add("graph_replays", sum.graph_replays);
      metrics->write(r);
    }
    return finished_despite_signal(sum);
  }

  // The run's results are written: a later signal ends the process at once
  // (stop_signal.h), and one that came during the final evaluation and
  // writes, kept until now so they completed, still sets the exit status.
  TrainSummary finished_despite_signal(TrainSummary sum) {
    set_stop_signal_phase(StopSignalPhase::Finished);
    sum.stop_signal = agreed_stop_signal();
    if (sum.stop_signal != 0)
      say(signal_name(sum.stop_signal) + " came while the run was finishing: it finished at step " +
          std::to_string(step) + " (" +
          (cfg.checkpoint_dir.empty() ? std::string("no --checkpoint-dir") : "checkpoint " + checkpoint_path(step)) +
          ")");
    return sum;
  }

  // The end of a run that a signal stopped at a step boundary: a checkpoint
  // (when there is a --checkpoint-dir), one line, a metrics record; no
  // evaluation, so the process ends well within a launcher's grace period.
  TrainSummary stopped_by(int signal, int64_t steps_this_run, int64_t samples_this_run, double train_s,
                          Clock::time_point run_start) {
    write_checkpoint();
    const std::string name = signal_name(signal);
    say("stopped by " + name + " at step " + std::to_string(step) + " (" +
        (cfg.checkpoint_dir.empty() ? std::string("no --checkpoint-dir, nothing saved")
                                    : "checkpoint " + checkpoint_path(step) + "; --resume continues") +
        ")");
    TrainSummary sum = summary_of_run(steps_this_run, samples_this_run, train_s, run_start);
    sum.stop_signal = signal;
    if (metrics) {
      JsonRecord r;
      r.add("event", "stopped").add("signal", name).add("step", step).add("steps_this_run", steps_this_run);
      r.add("skipped_steps", status.skipped_total).add("wall_s", sum.wall_s);
      if (!cfg.checkpoint_dir.empty()) r.add("checkpoint", checkpoint_path(step));
      metrics->write(r);
    }
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
TrainState Trainer::snapshot() const { return impl_->snapshot(); }
void Trainer::observe_batches(std::function<void(const uint32_t* indices, int rows)> observer) {
  impl_->batch_observer = std::move(observer);
}
BatchLoaderCounts Trainer::loader_counts() const { return impl_->loader.counts(); }

}  // namespace ddp
