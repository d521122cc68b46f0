// trainer_shards.cpp: the Trainer's memory by class (trainer_impl.h): what
// this rank holds, ZeRO's buffers included, and the banner's memory line.
#include "trainer/loop/trainer_impl.h"

namespace ddp {

StateBytes Trainer::Impl::held_state_bytes() const {
  StateBytes b = measured_state_bytes(params);
  b.zero_buffers = train_step.zero_buffer_bytes();
  b.grads_whole_for_accumulation = cfg.zero_stage >= 2 && !params.grads_sharded();
  return b;
}

void Trainer::Impl::report_memory() {
  const StateBytes mine = held_state_bytes();
  const size_t in_use = backend.allocations().in_use_bytes, counted = mine.total() + mine.zero_buffers;
  const size_t other =
      static_cast<size_t>(comm.allreduce_max_host(static_cast<int64_t>(in_use > counted ? in_use - counted : 0)));
  report.memory(largest_over_ranks(comm, mine), other,
                zero_formula_bytes(cfg.zero_stage, world(), model.parameters().parameter_count(),
                                   cfg.optimizer == OptimizerKind::AdamW));
}

}  // namespace ddp
