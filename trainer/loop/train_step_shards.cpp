// train_step_shards.cpp: the step's --zero parts (train_step.h): the
// reducer, the layer hooks and the padding wired to the stage, the
// transport's staging reserved for a captured step, stages 1 and 2's
// gathers after the update, and the whole FP16 weights at stage 3 for
// evaluation and samples.
#include "trainer/loop/train_step.h"

#include "trainer/zero/sharded_state.h"

namespace ddp {

void TrainStep::wire_shards(const ShardLayout& shards) {
  if (cfg_.zero_stage > 0) reducer_.shard_over(shards);
  // The captured step's collectives size the transport's staging in the
  // eager step before the capture; the checkpoints' and --save-weights'
  // FP32 gathers, twice as wide, come after it, when the staging may no
  // longer grow (a graph holds its address): reserved now, before any step,
  // at the size the first checkpoint of an uncaptured run grows it to.
  if (params_.sharded() && cfg_.cuda_graph) comm_.reserve_shard_staging(fp32_state_gather_layout(shards));
  // Stages 1 and 2 all-gather the updated weights under the next forward
  // (layer_shards.h); a captured step keeps the optimizer's own gather, so
  // the graph holds the whole step.
  overlap_update_gathers_ = params_.sharded() && !params_.weights_sharded() && !cfg_.cuda_graph;
  optimizer_.defer_weight_gather(overlap_update_gathers_);
  if (params_.grads_sharded() || params_.weights_sharded() || overlap_update_gathers_)
    layer_shards_ = std::make_unique<LayerShards>(backend_, comm_, model_, params_, shards, tables_, reducer_,
                                                  cfg_.zero_prefetch, overlap_update_gathers_);
  if (params_.sharded() && !params_.grads_sharded()) {
    const ParameterRegistry& registry = model_.parameters();
    for (size_t t = 0; t + 1 < registry.size(); ++t) {
      const size_t end = registry[t].offset + registry[t].count, next = registry[t + 1].offset;
      if (next > end) padding_gaps_.push_back({end, next - end});
    }
  }
}

void TrainStep::with_whole_weights(int64_t step, const std::function<void(const WeightTable&)>& use) {
  if (overlap_update_gathers_) layer_shards_->finish_updated_gathers();
  if (!params_.weights_sharded()) return use(tables_.weights_lowp);
  LayerShards::WholeWeights whole;
  {
    CollectiveWatch watch(watchdog_, "all-gather", step);
    whole = layer_shards_->gather_whole_weights();
  }
  layer_shards_->pause_hooks(true);
  try {
    use(whole.table);
  } catch (...) {
    layer_shards_->pause_hooks(false);
    throw;
  }
  layer_shards_->pause_hooks(false);
}

}  // namespace ddp
