// trainer_shards.cpp: the Trainer's --zero parts (trainer_impl.h): wiring
// the reducer, the layer hooks and the padding to the stage; the whole FP16
// weights for evaluation and samples at stage 3; the memory by class.
#include "trainer/loop/trainer_impl.h"

namespace ddp {

void Trainer::Impl::wire_shards() {
  if (cfg.zero_stage > 0) reducer.shard_over(shards);
  if (params.grads_sharded() || params.weights_sharded())
    layer_shards = std::make_unique<LayerShards>(backend, comm, model, params, shards, tables, reducer);
  if (params.sharded() && !params.grads_sharded()) {
    const ParameterRegistry& registry = model.parameters();
    for (size_t t = 0; t + 1 < registry.size(); ++t) {
      const size_t end = registry[t].offset + registry[t].count, next = registry[t + 1].offset;
      if (next > end) padding_gaps.push_back({end, next - end});
    }
  }
}

void Trainer::Impl::with_whole_weights(const std::function<void(const WeightTable&)>& use) {
  if (!params.weights_sharded()) return use(tables.weights_fp16);
  LayerShards::WholeWeights whole;
  {
    CollectiveWatch watch(watchdog, "all-gather", step);
    whole = layer_shards->gather_whole_weights();
  }
  layer_shards->pause_hooks(true);
  try {
    use(whole.table);
  } catch (...) {
    layer_shards->pause_hooks(false);
    throw;
  }
  layer_shards->pause_hooks(false);
}

StateBytes Trainer::Impl::held_state_bytes() const {
  StateBytes b = measured_state_bytes(params);
  if (layer_shards) b.zero_buffers = layer_shards->buffer_bytes();
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
