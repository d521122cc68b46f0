// train_step.cpp: the step of train_step.h, eager or replayed from a
// --cuda-graph capture.
#include "trainer/loop/train_step.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/ops/step_state.h"
#include "trainer/loop/fault_hooks.h"
#include "trainer/models/loss_head.h"
#include "trainer/optim/lr_scaling.h"

namespace ddp {
namespace {

OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig o;
  o.kind = c.optimizer;
  o.momentum = c.momentum;
  o.weight_decay = c.weight_decay;
  o.nesterov = c.nesterov;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.clip_grad_norm = c.clip_grad_norm;
  return o;
}

MixedPrecisionOptimizer make_optimizer(const TrainConfig& c, Backend& b, ParameterStore& params, Communicator& m,
                                       const ShardLayout& shards) {
  if (c.zero_stage == 0) return MixedPrecisionOptimizer(b, params, optimizer_config(c));
  return MixedPrecisionOptimizer(b, params, optimizer_config(c), m, shards);
}

// Each parameter tensor is one segment for the reducer, in registry order.
std::vector<GradientSegment> gradient_segments(const ParameterRegistry& registry) {
  std::vector<GradientSegment> segments;
  for (const ParameterTensor& t : registry.tensors()) segments.push_back({t.offset, t.count});
  return segments;
}

// The schedule over the run's steps, its base rate scaled to the global
// batch (--lr-scaling).
LrSchedule lr_schedule(const TrainConfig& c, const RunPlan& plan, int64_t global_batch) {
  LrSchedule s;
  s.kind = c.lr_schedule;
  s.base_lr = scaled_lr(c.lr, c.lr_scaling, c.base_batch, global_batch);
  s.total_steps = plan.total_steps;
  s.warmup_steps = c.warmup_steps;
  s.step_size = c.lr_step_size;
  s.gamma = c.lr_gamma;
  return s;
}

}  // namespace

TrainStep::TrainStep(const TrainConfig& cfg, Backend& backend, Communicator& comm, Model& model, ParameterStore& params,
                     const ShardLayout& shards, StepStateView& state, EpochCursor& cursor, const Dataset& train,
                     const RunPlan& plan, ProgressReporter& progress)
    : cfg_(cfg),
      backend_(backend),
      comm_(comm),
      model_(model),
      params_(params),
      state_(state),
      cursor_(cursor),
      plan_(plan),
      optimizer_(make_optimizer(cfg, backend, params, comm, shards)),
      scale_rule_(loss_scale_rule(cfg.loss_scaler, cfg.max_bad_steps)),
      loader_(backend, train, static_cast<int>(cfg.batch_size)),
      schedule_(lr_schedule(cfg, plan, cursor.samples_per_rank_step() * comm.world_size())),
      reducer_(comm, gradient_segments(model.parameters()), static_cast<size_t>(cfg.bucket_mb * (1 << 20)),
               static_cast<size_t>(cfg.first_bucket_mb * (1 << 20))),
      tables_(training_tables(params)),
      captured_(cfg, backend, comm, train, optimizer_, progress) {
  wire_shards(shards);
  if (cfg.grad_reduce_fp32) {  // after the shards: the reducer's mode is set, its staging sized
    reducer_.reduce_in_fp32(backend, params.grads_fp32.data());
    optimizer_.read_fp32_sums(true);
  }
  if (cfg.cuda_graph) captured_.enable();
  // The overflow test hook lands in the first element, in bucket 0.
  reducer_.before_start = [this](size_t bucket, lowp16* first) {
    if (bucket == 0 && overflow_injected_at(cfg_, comm_.rank(), step_ + 1)) inject_overflow(backend_, first);
  };
}

TrainStep::Result TrainStep::run(int64_t step) {
  step_ = step;
  stall_if_asked(cfg_, comm_.rank(), step + 1);
  if (tracer_) tracer_->begin_step(step + 1);
  // Where the host may block in a step (the batch upload, the optimizer's
  // reads when clipping or logging, CPU ranks' wait for the sums) it is
  // waiting, directly or through the device, for the step's collectives.
  CollectiveWatch watch(watchdog_, "all-reduce", step + 1);
  const StepSlice now = cursor_.now();
  const std::vector<uint32_t>& order = cursor_.order_for(now.epoch);
  const int64_t step_rows = now.step_rows, micro_batches = now.micro_batches;
  Result r;
  r.rows = step_rows;
  r.lr = schedule_.lr_at(step);
  r.log_step = (step + 1) % cfg_.log_every == 0 || step + 1 == plan_.total_steps;
  // Each micro-batch's loss is a mean over its rows; the step's gradient
  // is their mean (1/micro_batches, as `loss / K` in PyTorch), divided by
  // --grad-predivide before the all-reduce. All of it rides on the scale
  // of the loss gradient, so backward needs no extra pass. The scale lives
  // on the device: prepare derives the step's scalars there (queued, no wait).
  StepStatusPrepare prepare;
  prepare.status = state_.device();
  prepare.backward_divisor = static_cast<double>(micro_batches) * cfg_.grad_predivide;
  prepare.unscale_divisor = comm_.world_size() / cfg_.grad_predivide;
  prepare.lr = static_cast<float>(r.lr);
  step_status_prepare(backend_, prepare);
  const bool replayed = captured_.eligible(micro_batches, step_rows, r.log_step, step + 1);
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const uint32_t* batch_indices = order.data() + cursor_.micro_first(now, micro);
    const int rows = cursor_.micro_rows(now, micro);
    if (batch_observer_) batch_observer_(batch_indices, rows);
    if (tracer_) tracer_->begin_span("upload");
    const DeviceBatch batch = loader_.load(batch_indices, rows);  // outside any capture
    if (tracer_) tracer_->end_span();
    if (replayed)
      captured_.replay(batch, step + 1, [this](const DeviceBatch& fixed) { captured_pass(fixed); });
    else
      micro_batch_pass(batch, rows, micro, micro_batches);
    // With this micro-batch's work queued (on a GPU the device is busy
    // with it), gather the next one and queue its copy.
    if (cfg_.prefetch_batches) prefetch_after(now, micro);
  }
  if (!replayed) {
    r.outcome = reduce_and_update(r.log_step);
    captured_.count_eager_step(micro_batches, step_rows, r.log_step, step + 1);
  }
  if (tracer_) tracer_->end_step();
  cursor_.advance(step_rows);
  return r;
}

void TrainStep::micro_batch_pass(const DeviceBatch& batch, int rows, int64_t micro, int64_t micro_batches) {
  const ScalarArg backward_scale = ScalarArg::at(&state_.device()->backward_scale);
  DDP_REQUIRE(batch.rows == rows, "micro_batch_pass: the batch is not the rows asked for");
  if (model_.fuses_loss()) {  // the loss runs inside the last layer's span
    model_.forward_with_loss(batch, tables_.weights_lowp, backward_scale, state_.loss_mean_device());
    if (tracer_) tracer_->end_layers();
  } else {
    const ModelOutput out = model_.forward(batch, tables_.weights_lowp);
    if (tracer_) {
      tracer_->end_layers();
      tracer_->begin_span("loss");
    }
    loss_forward(backend_, cfg_.loss, out, batch, state_.loss_mean_device(), nullptr);
    loss_backward(backend_, cfg_.loss, out, batch, backward_scale, model_.output_grad());
    if (tracer_) tracer_->end_span();
  }
  const bool last = micro + 1 == micro_batches;
  if (last) {
    for (const GradientSegment& gap : padding_gaps_)
      backend_.fill_zero(params_.grads_lowp.data() + gap.offset, gap.count * sizeof(lowp16));
    reducer_.begin(params_.grads_lowp.data());
    if (layer_shards_) layer_shards_->begin_step();
  }
  model_.backward(
      tables_.weights_lowp, tables_.grads_lowp, /*accumulate=*/micro > 0,
      last ? GradientsReady([this](size_t first, size_t end) { reducer_.mark_ready(first, end); }) : GradientsReady());
  if (tracer_) tracer_->end_layers();
}

void TrainStep::captured_pass(const DeviceBatch& fixed) {
  micro_batch_pass(fixed, fixed.rows, 0, 1);
  reduce_and_update(false);
}

StepOutcome TrainStep::reduce_and_update(bool log_step) {
  if (tracer_) tracer_->begin_span("comm_wait");
  reducer_.finalize();
  if (tracer_) tracer_->begin_span("optimizer");
  const StepOutcome outcome = optimizer_.step(state_.device(), log_step);
  if (overlap_update_gathers_) layer_shards_->start_updated_weight_gathers();
  StepStatusFinish finish;
  finish.rule = scale_rule_;
  finish.status = state_.device();
  step_status_finish(backend_, finish);
  if (tracer_) tracer_->end_span();
  return outcome;
}

void TrainStep::prefetch_after(const StepSlice& s, int64_t micro) {
  const BatchRows next = cursor_.prefetch_target(s, micro);
  loader_.prefetch(next.indices, next.rows);
}

size_t TrainStep::elements_gathered() const {
  return optimizer_.elements_gathered() + (layer_shards_ ? layer_shards_->elements_gathered() : 0);
}

void TrainStep::set_tracer(StepTracer* tracer) {
  tracer_ = tracer;
  reducer_.set_trace(&tracer->collectives());
  reducer_.on_ready = [this](size_t bucket) { tracer_->bucket_started(static_cast<int>(bucket)); };
  if (layer_shards_) layer_shards_->set_trace(&tracer->collectives());
}

}  // namespace ddp
