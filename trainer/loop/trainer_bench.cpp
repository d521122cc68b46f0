// trainer_bench.cpp: --bench's timed steps (trainer_impl.h): warm-up steps,
// a barrier, then each timed step's wall time with the device synchronised
// at its end, and what its collectives moved.
#include <algorithm>

#include "trainer/loop/trainer_impl.h"

namespace ddp {

BenchTimings Trainer::Impl::bench(int64_t warmup_steps, int64_t timed_steps) {
  DDP_REQUIRE(prepared_, "Trainer::bench before prepare");
  BenchTimings t;
  t.global_samples_per_step = global_batch();
  auto one_step = [this] {
    train_step_.run(step_);
    ++step_;
    if (cursor_.epoch_done()) cursor_.next_epoch();
  };
  for (int64_t i = 0; i < warmup_steps; ++i) one_step();
  backend_.synchronize();
  {
    CollectiveWatch watch(observers_.watchdog, "barrier", step_);
    comm_.barrier();
  }
  comm_.take_allreduce_times();
  const int64_t replays_before = train_step_.graph_replays();
  const size_t reduced_before = train_step_.elements_reduced(), gathered_before = train_step_.elements_gathered();
  for (int64_t i = 0; i < timed_steps; ++i) {
    if (observers_.tracer) observers_.tracer->prepare_step(step_ + 1);  // a window's barrier, outside the timed step
    const auto start = Clock::now();
    one_step();
    backend_.synchronize();
    t.step_s.push_back(seconds_since(start));
  }
  if (observers_.tracer) observers_.tracer->finish();  // after the timed steps: its flush and write are not timed
  t.allreduce = comm_.take_allreduce_times();
  t.graph_replays = train_step_.graph_replays() - replays_before;
  // Replayed steps do not pass through the reducer: count them as eager ones.
  const double steps = static_cast<double>(std::max<int64_t>(1, timed_steps - t.graph_replays));
  const double reduced = static_cast<double>(train_step_.elements_reduced() - reduced_before) / steps;
  (cfg_.zero_stage > 0 ? t.reduce_scatter_elements_per_step : t.allreduce_elements_per_step) = reduced;
  t.allgather_elements_per_step = static_cast<double>(train_step_.elements_gathered() - gathered_before) / steps;
  t.precision = cfg_.precision;
  t.reduce_wire_bytes = train_step_.reduce_wire_bytes();
  t.zero_stage = cfg_.zero_stage;
  t.zero_shard_size = comm_.shard_size();
  t.parameters = model_->parameters().parameter_count();
  t.state_bytes_max = static_cast<size_t>(comm_.allreduce_max_host(static_cast<int64_t>(held_state_bytes().total())));
  t.peak_allocated_bytes_max =
      static_cast<size_t>(comm_.allreduce_max_host(static_cast<int64_t>(backend_.allocations().peak_bytes)));
  t.state_formula_bytes =
      zero_formula_bytes(cfg_.zero_stage, comm_.shard_size(), t.parameters, cfg_.optimizer == OptimizerKind::AdamW)
          .ours_bytes;
  t.activations = model_->activation_kinds();
  t.device_used_bytes_max =
      static_cast<size_t>(comm_.allreduce_max_host(static_cast<int64_t>(backend_.device_used_bytes())));
  return t;
}

}  // namespace ddp
