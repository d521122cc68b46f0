// train_step.cpp: one training step of trainer_impl.h (K micro-batches
// forward/backward, the bucketed all-reduce started as backward finishes
// each bucket, the optimizer and loss-scale update on the device), eager or
// replayed from a --cuda-graph capture, and the benchmark that times it.
#include <algorithm>
#include <functional>
#include <vector>

#include "trainer/loop/fault_hooks.h"
#include "trainer/models/loss_head.h"
#include "trainer/loop/trainer_impl.h"

namespace ddp {

Trainer::Impl::StepResult Trainer::Impl::train_step() {
  stall_if_asked(cfg, comm.rank(), step + 1);
  if (tracer) tracer->begin_step(step + 1);
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
    if (tracer) tracer->begin_span("upload");
    const DeviceBatch batch = loader.load(batch_indices, rows);  // outside any capture
    if (tracer) tracer->end_span();
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
  if (tracer) tracer->end_step();
  ++step;
  cursor.advance(step_rows);
  return r;
}

void Trainer::Impl::micro_batch_pass(const DeviceBatch& batch, int rows, int64_t micro, int64_t micro_batches) {
  const ScalarArg backward_scale = ScalarArg::at(&state.device()->backward_scale);
  DDP_REQUIRE(batch.rows == rows, "micro_batch_pass: the batch is not the rows asked for");
  const ModelOutput out = model.forward(batch, tables.weights_fp16);
  if (tracer) tracer->end_layers(), tracer->begin_span("loss");
  loss_forward(backend, cfg.loss, out, batch, state.loss_mean_device(), nullptr);
  loss_backward(backend, cfg.loss, out, batch, backward_scale, model.output_grad());
  if (tracer) tracer->end_span();
  const bool last = micro + 1 == micro_batches;
  if (last) {
    for (const GradientSegment& gap : padding_gaps)
      backend.fill_zero(params.grads_fp16.data() + gap.offset, gap.count * sizeof(half16));
    reducer.begin(params.grads_fp16.data());
    if (layer_shards) layer_shards->begin_step();
  }
  model.backward(tables.weights_fp16, tables.grads_fp16, /*accumulate=*/micro > 0,
                 last ? GradientsReady([this](size_t first, size_t end) { reducer.mark_ready(first, end); })
                      : GradientsReady());
  if (tracer) tracer->end_layers();
}

void Trainer::Impl::captured_pass(const DeviceBatch& fixed) {
  micro_batch_pass(fixed, fixed.rows, 0, 1);
  reduce_and_update(false);
}

StepOutcome Trainer::Impl::reduce_and_update(bool log_step) {
  if (tracer) tracer->begin_span("comm_wait");
  reducer.finalize();
  if (tracer) tracer->begin_span("optimizer");
  const StepOutcome outcome = optimizer.step(state.device(), log_step);
  backend.step_status_finish(scale_rule, state.device());
  if (tracer) tracer->end_span();
  return outcome;
}

void Trainer::Impl::prefetch_after(const StepSlice& s, int64_t micro) {
  const BatchRows next = cursor.prefetch_target(s, micro);
  loader.prefetch(next.indices, next.rows);
}

BenchTimings Trainer::Impl::bench(int64_t warmup_steps, int64_t timed_steps) {
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
  auto gathered = [this] { return optimizer.elements_gathered() + (layer_shards ? layer_shards->elements_gathered() : 0); };
  const size_t reduced_before = reducer.elements_started(), gathered_before = gathered();
  for (int64_t i = 0; i < timed_steps; ++i) {
    if (tracer) tracer->prepare_step(step + 1);  // a window's barrier, outside the timed step
    const auto start = Clock::now();
    one_step();
    backend.synchronize();
    t.step_s.push_back(seconds_since(start));
  }
  if (tracer) tracer->finish();  // after the timed steps: its flush and write are not timed
  t.allreduce = comm.take_allreduce_times();
  t.graph_replays = captured.replays() - replays_before;
  // Replayed steps do not pass through the reducer: count them as eager ones.
  const double steps = static_cast<double>(std::max<int64_t>(1, timed_steps - t.graph_replays));
  const double reduced = static_cast<double>(reducer.elements_started() - reduced_before) / steps;
  (cfg.zero_stage > 0 ? t.reduce_scatter_elements_per_step : t.allreduce_elements_per_step) = reduced;
  t.allgather_elements_per_step = static_cast<double>(gathered() - gathered_before) / steps;
  t.zero_stage = cfg.zero_stage;
  t.parameters = model.parameters().parameter_count();
  t.state_bytes_max = static_cast<size_t>(comm.allreduce_max_host(static_cast<int64_t>(held_state_bytes().total())));
  t.peak_allocated_bytes_max =
      static_cast<size_t>(comm.allreduce_max_host(static_cast<int64_t>(backend.allocations().peak_bytes)));
  return t;
}

}  // namespace ddp
