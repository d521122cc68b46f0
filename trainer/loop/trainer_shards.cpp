// trainer_shards.cpp: the Trainer's memory by class (trainer_impl.h): what
// this rank holds, ZeRO's buffers included, and the banner's memory line.
#include "trainer/loop/trainer_impl.h"

namespace ddp {

StateBytes Trainer::Impl::held_state_bytes() const {
  StateBytes b = measured_state_bytes(params_);
  b.zero_buffers = train_step_.zero_buffer_bytes();
  b.grads_whole_for_accumulation = cfg_.zero_stage >= 2 && !params_.grads_sharded();
  return b;
}

void Trainer::Impl::report_memory() {
  const StateBytes mine = held_state_bytes();
  const size_t in_use = backend_.allocations().in_use_bytes, counted = mine.total() + mine.zero_buffers;
  const size_t other =
      static_cast<size_t>(comm_.allreduce_max_host(static_cast<int64_t>(in_use > counted ? in_use - counted : 0)));
  report_.memory(largest_over_ranks(comm_, mine), other,
                 zero_formula_bytes(cfg_.zero_stage, comm_.shard_size(), model_->parameters().parameter_count(),
                                    cfg_.optimizer == OptimizerKind::AdamW),
                 model_->activation_kinds());
}

}  // namespace ddp
