// layer_shards.cpp
#include "trainer/zero/layer_shards.h"

#include <algorithm>

#include "kernels/error.h"

namespace ddp {
namespace {
// Gather-slot positions keep cuBLASLt's 16-byte alignment of every tensor.
size_t aligned(size_t count) {
  const size_t a = ParameterRegistry::kAlignElements;
  return (count + a - 1) / a * a;
}
}  // namespace

LayerShards::LayerShards(Backend& backend, Communicator& comm, Model& model, ParameterStore& params,
                         const ShardLayout& layout, ParameterTables& tables, GradientReducer& reducer,
                         int prefetch_depth, bool overlap_update_gathers)
    : backend_(backend),
      comm_(comm),
      model_(model),
      params_(params),
      layout_(layout),
      tables_(tables),
      reducer_(reducer),
      prefetch_depth_(prefetch_depth) {
  DDP_REQUIRE(prefetch_depth >= 0, "LayerShards: negative prefetch depth");
  const ParameterRegistry& registry = params.registry();
  DDP_REQUIRE(layout.range(comm.shard_rank()) == params.owned(), "LayerShards: the layout is not the store's");
  for (int l = 0; l < model.layer_count(); ++l) layer_tensors_.push_back(model.layer_tensors(l));
  if (params.weights_sharded()) {
    size_t slot_count = 0;
    for (int l = 0; l < model.layer_count(); ++l) {
      std::vector<Run> runs;
      for (size_t t : layer_tensors_[static_cast<size_t>(l)]) {
        if (!runs.empty() && runs.back().end == t) {
          runs.back().end = t + 1;
        } else {
          runs.push_back(Run{t, t + 1, registry[t].offset, 0});
        }
        runs.back().count = registry[t].offset + registry[t].count - runs.back().offset;
      }
      size_t need = 0;
      for (Run& r : runs) {
        r.slice = layout.slice(r.offset, r.count);
        need += aligned(r.count);
      }
      slot_count = std::max(slot_count, need);
      layer_runs_.push_back(std::move(runs));
    }
    const size_t slots = static_cast<size_t>(std::max(2, prefetch_depth + 1));
    for (size_t i = 0; i < slots; ++i) slots_.emplace_back(backend, slot_count);
    for (int l = 0; l < model.layer_count(); ++l) schedule_.push_back(Gather{false, l});
    for (int l = model.layer_count() - 1; l >= 0; --l) schedule_.push_back(Gather{true, l});
    marks_.assign(schedule_.size(), 0);
    tables_.weights_lowp = WeightTable(registry.size());  // no entry until a layer's gather
  }
  if (params.grads_sharded()) {
    const std::vector<GradientBucket>& buckets = reducer.buckets();
    bucket_of_tensor_.assign(registry.size(), 0);
    for (size_t b = 0; b < buckets.size(); ++b)
      for (size_t t = buckets[b].first_segment; t < buckets[b].end_segment; ++t) bucket_of_tensor_[t] = b;
    staging_of_bucket_.assign(buckets.size(), -1);
    for (const GradientBucket& b : buckets) {
      std::vector<GradientSegment> gaps;
      for (size_t t = b.first_segment; t + 1 < b.end_segment; ++t) {
        const size_t end = registry[t].offset + registry[t].count, next = registry[t + 1].offset;
        if (next > end) gaps.push_back({end - b.offset, next - end});
      }
      bucket_gaps_.push_back(std::move(gaps));
    }
    tables_.grads_lowp = GradTable(registry.size());  // no entry until a layer's staging
    reducer.shard_over(layout, params.owned_grads_lowp(), [this](size_t bucket) {
      DDP_REQUIRE(staging_of_bucket_[bucket] >= 0, "LayerShards: a bucket finished without staging");
      return staging_pool_[static_cast<size_t>(staging_of_bucket_[bucket])].data();
    });
  }
  DDP_REQUIRE(!overlap_update_gathers || !params.weights_sharded(),
              "LayerShards: stage 3 gathers each layer's weights; there are no updated weights to gather");
  if (overlap_update_gathers) plan_update_chunks();
  LayerHooks hooks;
  if (params.weights_sharded()) hooks.before_forward = [this](int layer) { gather_hook(Gather{false, layer}); };
  if (overlap_update_gathers) hooks.before_forward = [this](int layer) { wait_for_updated_layer(layer); };
  hooks.before_backward = [this](int layer) {
    if (params_.weights_sharded()) gather_hook(Gather{true, layer});
    if (params_.grads_sharded()) stage_layer(layer);
  };
  model.set_layer_hooks(hooks);
  hooks_ = hooks;
}

void LayerShards::gather_hook(Gather at) {
  // Where this hook is in the pass: the expected entry, or (a forward
  // without its backward, a new micro-batch) wherever `at` first comes
  // after it or from the start. Gathers started for other entries are
  // let finish first, so no slot they write is handed out meanwhile.
  size_t entry = next_entry_;
  if (entry == schedule_.size() && at == schedule_[0]) {  // the last pass ended, every gather waited for
    entry = 0;
    started_end_ = 0;
  }
  if (entry >= schedule_.size() || !(schedule_[entry] == at)) {
    entry = 0;
    while (entry < schedule_.size() && !(schedule_[entry] == at)) ++entry;
    DDP_REQUIRE(entry < schedule_.size(), "LayerShards: a hook for a layer the model does not have");
    if (started_end_ > 0) comm_.wait_until(marks_[started_end_ - 1]);
    started_end_ = entry;
  }
  if (started_end_ <= entry) start_gather(entry);
  const size_t ahead = std::min(schedule_.size(), entry + 1 + static_cast<size_t>(prefetch_depth_));
  while (started_end_ < ahead) {
    start_gather(started_end_);
    ++gathers_prefetched_;
  }
  comm_.wait_until(marks_[entry]);
  const ParameterRegistry& registry = params_.registry();
  lowp16* slot = slots_[entry % slots_.size()].data();
  size_t position = 0;
  for (const Run& run : layer_runs_[static_cast<size_t>(at.layer)]) {
    for (size_t t = run.first; t < run.end; ++t)
      tables_.weights_lowp.set(t, slot + position + (registry[t].offset - run.offset));
    position += aligned(run.count);
  }
  next_entry_ = entry + 1;
}

void LayerShards::start_gather(size_t entry) {
  const int layer = schedule_[entry].layer;
  lowp16* slot = slots_[entry % slots_.size()].data();
  const size_t owned_begin = params_.owned().begin;
  size_t position = 0;
  for (const Run& run : layer_runs_[static_cast<size_t>(layer)]) {
    const ShardLayout& slice = run.slice;
    const ShardRange mine = slice.range(comm_.shard_rank());
    const lowp16* from = params_.owned_weights_lowp() + (mine.count() > 0 ? run.offset + mine.begin - owned_begin : 0);
    if (trace_ != nullptr) trace_->tag_next(-1, layer);
    comm_.start_allgather_lowp(from, slot + position, slice);
    if (trace_ != nullptr) trace_->tag_next(-1, -1);
    elements_gathered_ += run.count;
    position += aligned(run.count);
  }
  marks_[entry] = comm_.mark_started();
  started_end_ = entry + 1;
}

// The layout cut at the gradient buckets' boundaries (every element in one
// chunk, the gaps between buckets included), in forward order: the
// registry puts the last layer first, so from the highest offset down.
void LayerShards::plan_update_chunks() {
  std::vector<size_t> cuts{0, layout_.total_count()};
  for (const GradientBucket& b : reducer_.buckets()) {
    cuts.push_back(b.offset);
    cuts.push_back(b.offset + b.count);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = cuts.size() - 1; i > 0; --i) {
    if (cuts[i] > layout_.total_count()) continue;
    UpdateChunk chunk;
    chunk.offset = cuts[i - 1];
    chunk.count = cuts[i] - cuts[i - 1];
    chunk.slice = layout_.slice(chunk.offset, chunk.count);
    update_chunks_.push_back(std::move(chunk));
  }
  update_marks_.assign(update_chunks_.size(), 0);
  const ParameterRegistry& registry = params_.registry();
  const auto position_of = [&](size_t element) {
    for (size_t c = 0; c < update_chunks_.size(); ++c)
      if (element >= update_chunks_[c].offset && element < update_chunks_[c].offset + update_chunks_[c].count) return c;
    throw Error("LayerShards: an element outside the layout");
  };
  for (const std::vector<size_t>& tensors : layer_tensors_) {
    size_t last = 0;
    for (size_t t : tensors) {
      if (registry[t].count == 0) continue;
      last = std::max({last, position_of(registry[t].offset), position_of(registry[t].offset + registry[t].count - 1)});
    }
    layer_update_chunk_.push_back(last);
  }
}

void LayerShards::start_updated_weight_gathers() {
  DDP_REQUIRE(!update_chunks_.empty(), "LayerShards: not made to gather the updated weights");
  for (size_t c = 0; c < update_chunks_.size(); ++c) {
    const UpdateChunk& chunk = update_chunks_[c];
    lowp16* full = params_.weights_lowp.data() + chunk.offset;
    // In place: this rank's part of the chunk is where the update wrote it.
    comm_.start_allgather_lowp(full + chunk.slice.range(comm_.shard_rank()).begin, full, chunk.slice);
    elements_gathered_ += chunk.count;
    update_marks_[c] = comm_.mark_started();
  }
  updates_pending_ = true;
}

void LayerShards::wait_for_updated_layer(int layer) {
  if (!updates_pending_) return;
  comm_.wait_until(update_marks_[layer_update_chunk_[static_cast<size_t>(layer)]]);
}

void LayerShards::finish_updated_gathers() {
  if (!updates_pending_) return;
  comm_.wait_until(update_marks_.back());
  updates_pending_ = false;
}

void LayerShards::begin_step() {
  std::fill(staging_of_bucket_.begin(), staging_of_bucket_.end(), -1);
  std::fill(pool_owner_.begin(), pool_owner_.end(), -1);
}

void LayerShards::stage_layer(int layer) {
  for (size_t t : layer_tensors_[static_cast<size_t>(layer)])
    if (staging_of_bucket_[bucket_of_tensor_[t]] < 0) assign_staging(bucket_of_tensor_[t]);
}

void LayerShards::assign_staging(size_t bucket) {
  const GradientBucket& b = reducer_.buckets()[bucket];
  // The smallest free buffer that fits; none free: the collectives started
  // so far complete and free theirs; still none: a new one.
  auto free_fit = [&]() -> int {
    int best = -1;
    for (size_t i = 0; i < staging_pool_.size(); ++i)
      if (pool_owner_[i] < 0 && staging_pool_[i].count() >= b.count &&
          (best < 0 || staging_pool_[i].count() < staging_pool_[static_cast<size_t>(best)].count()))
        best = static_cast<int>(i);
    return best;
  };
  int index = free_fit();
  if (index < 0) {
    bool any_started = false;
    for (int owner : pool_owner_) any_started |= owner >= 0 && static_cast<size_t>(owner) < reducer_.buckets_started();
    if (any_started) {
      comm_.wait_allreduces();
      for (int& owner : pool_owner_)
        if (owner >= 0 && static_cast<size_t>(owner) < reducer_.buckets_started()) owner = -1;
      index = free_fit();
    }
  }
  if (index < 0) {
    staging_pool_.emplace_back(backend_, b.count);
    pool_owner_.push_back(-1);
    index = static_cast<int>(staging_pool_.size() - 1);
  }
  Buffer<lowp16>& staging = staging_pool_[static_cast<size_t>(index)];
  for (const GradientSegment& gap : bucket_gaps_[bucket])
    backend_.fill_zero(staging.data() + gap.offset, gap.count * sizeof(lowp16));
  pool_owner_[static_cast<size_t>(index)] = static_cast<int>(bucket);
  staging_of_bucket_[bucket] = index;
  const ParameterRegistry& registry = params_.registry();
  for (size_t t = b.first_segment; t < b.end_segment; ++t)
    tables_.grads_lowp.set(t, staging.data() + (registry[t].offset - b.offset));
}

LayerShards::WholeWeights LayerShards::gather_whole_weights() {
  DDP_REQUIRE(params_.weights_sharded(), "LayerShards: the weights are whole already");
  WholeWeights w;
  w.buffer = Buffer<lowp16>(backend_, params_.count());
  comm_.allgather_lowp(params_.owned_weights_lowp(), w.buffer.data(), layout_);
  w.table = WeightTable::flat(w.buffer.data(), params_.registry());
  return w;
}

void LayerShards::pause_hooks(bool paused) { model_.set_layer_hooks(paused ? LayerHooks{} : hooks_); }

size_t LayerShards::buffer_bytes() const {
  size_t bytes = 0;
  for (const Buffer<lowp16>& slot : slots_) bytes += slot.size_bytes();
  for (const Buffer<lowp16>& b : staging_pool_) bytes += b.size_bytes();
  return bytes;
}

}  // namespace ddp
