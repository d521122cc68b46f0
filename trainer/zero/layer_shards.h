// layer_shards.h: ZeRO on the model's layer hooks (model.h) and tables
// (tensor_table.h): stage 1 and 2's all-gather of the updated weights, for
// a store whose FP16 gradients (stage 2) and FP16 weights (stage 3) hold
// this rank's range only.
//
// Stage 2, gradients: before a layer's backward, each bucket holding one of
// its tensors gets a staging buffer (the padding between its tensors
// zeroed: it is summed too, and backward writes only tensors) and the
// gradient table points the bucket's tensors into it; the reducer
// reduce-scatters it from there into the rank's range (GradientReducer's
// staged mode). A staging buffer is reused once the
// collective that read it has completed: when none is free, the step waits
// for the collectives started so far (Communicator::wait_allreduces) and
// takes theirs; only then is a new one allocated. So a rank holds, beyond
// its range, the buckets backward is filling and the ones in flight.
//
// Stage 3, weights: before a layer's forward and again before its backward
// its tensors are all-gathered, run by run of consecutive tensors, from
// every rank's range into a gather slot, and the weight table points at
// them. Nothing else of the weights is held. The GPT's tied wte is gathered
// for its first and its last layer. Evaluation and samples, whose forward
// passes are not collective (ranks may evaluate different numbers of
// batches), get the whole FP16 weights gathered once into a transient
// buffer instead.
//
// Prefetch (--zero-prefetch N): a pass's gathers are one schedule, the
// layers in forward order then in backward order; at each hook the layer's
// own gather is waited for (Communicator::wait_until its mark: not the
// reduce-scatters queued behind it) and the next N are started, so they
// run on the communication thread or stream while this layer computes.
// Gather i lands in slot i mod (N + 1) (at least two slots): the N in
// flight and the one being read. The slot it overwrites held gather i - N - 1,
// whose layer is done (on a device, the transport orders each collective
// after the compute stream's work so far). N = 0 gathers each layer at its
// hook, as before. Every N gives the same bits: the gathers move the same
// values.
//
// Stages 1 and 2, the updated weights (overlap_update_gathers): after the
// optimizer step the FP16 weights are all-gathered in place chunk by chunk
// (the gradient buckets' ranges, in forward order: the first layers'
// first), each chunk's mark kept, and before each layer's forward the
// layer waits for the chunks holding its tensors only, so the gathers of
// the later layers run under the earlier layers' compute (Megatron's
// --overlap-param-gather). Anything else that reads the weights between
// steps (evaluation, samples, a download) calls finish_updated_gathers().
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/gradient_reducer.h"
#include "kernels/buffer.h"
#include "trainer/models/model.h"
#include "trainer/params/parameter_store.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

class LayerShards {
 public:
  // Installs the model's hooks and, for a store with sharded gradients, the
  // reducer's staged mode. Everything must outlive this.
  // prefetch_depth: the gathers started ahead of the layer that reads them
  // (stage 3); overlap_update_gathers: stages 1 and 2's gathers after the
  // update are this object's (start_updated_weight_gathers).
  LayerShards(Backend& backend, Communicator& comm, Model& model, ParameterStore& params, const ShardLayout& layout,
              ParameterTables& tables, GradientReducer& reducer, int prefetch_depth = 0,
              bool overlap_update_gathers = false);

  // Stages 1 and 2: starts the in-place all-gathers of the updated FP16
  // weights, chunk by chunk in forward order; each layer's forward waits
  // for its own chunks.
  void start_updated_weight_gathers();
  // Completes them (before the weights are read outside a forward pass).
  void finish_updated_gathers();

  // A step's gradients begin: every staging buffer is free again (the
  // previous step's collectives completed in its finalize).
  void begin_step();

  // The whole FP16 weights, gathered from every rank (a collective), and a
  // flat table over them; for evaluation and samples. Stage 3 only.
  struct WholeWeights {
    Buffer<lowp16> buffer;
    WeightTable table;
  };
  WholeWeights gather_whole_weights();
  // Off while the model runs outside training's collective order
  // (evaluation on the whole weights), on again after.
  void pause_hooks(bool paused);

  // Bytes of the gather slots and staging buffers now held.
  size_t buffer_bytes() const;

  // FP16 elements the layers' gathers handed to all-gathers so far (stage 3).
  size_t elements_gathered() const { return elements_gathered_; }

  // --trace: each layer's gathers are tagged with the layer (null: not traced).
  void set_trace(CollectiveTrace* trace) { trace_ = trace; }

  // Test hook: how many staging buffers were allocated so far.
  size_t staging_allocations() const { return staging_pool_.size(); }
  // Stage 3's gather slots: prefetch depth + 1, at least 2.
  size_t gather_slots() const { return slots_.size(); }
  // Gathers started ahead of their hook so far (prefetched), for tests.
  size_t gathers_prefetched() const { return gathers_prefetched_; }

 private:
  struct Run {  // consecutive tensors [first, end) and their span of the layout
    size_t first = 0, end = 0;
    size_t offset = 0, count = 0;
    ShardLayout slice{{0, 0}};  // the ranks' ranges of the span (set once: no allocation per step)
  };
  // One entry of a pass's gather schedule: a layer before its forward or
  // before its backward.
  struct Gather {
    bool backward = false;
    int layer = 0;
    bool operator==(const Gather& o) const { return backward == o.backward && layer == o.layer; }
  };
  void gather_hook(Gather at);
  void start_gather(size_t entry);
  void plan_update_chunks();
  void wait_for_updated_layer(int layer);
  void stage_layer(int layer);
  void assign_staging(size_t bucket);

  Backend& backend_;
  Communicator& comm_;
  Model& model_;
  ParameterStore& params_;
  ShardLayout layout_;
  ParameterTables& tables_;
  GradientReducer& reducer_;
  std::vector<std::vector<size_t>> layer_tensors_;  // per layer, Model::layer_tensors once
  std::vector<std::vector<Run>> layer_runs_;        // per layer
  std::vector<Buffer<lowp16>> slots_;               // stage 3 gather slots
  int prefetch_depth_ = 0;
  std::vector<Gather> schedule_;                     // forward 0..L-1, then backward L-1..0
  std::vector<Communicator::CollectiveMark> marks_;  // per schedule entry, once started
  size_t next_entry_ = 0;                            // the entry the next hook is expected at
  size_t started_end_ = 0;                           // entries [0, started_end_) of this pass started
  size_t gathers_prefetched_ = 0;
  // Stages 1 and 2's gathers after the update: chunks of the layout in
  // gather order, each with its slice and its mark this step; per layer the
  // last chunk (in gather order) holding one of its tensors.
  struct UpdateChunk {
    size_t offset = 0, count = 0;
    ShardLayout slice{{0, 0}};
  };
  std::vector<UpdateChunk> update_chunks_;
  std::vector<Communicator::CollectiveMark> update_marks_;
  std::vector<size_t> layer_update_chunk_;
  bool updates_pending_ = false;
  std::vector<size_t> bucket_of_tensor_;
  std::vector<Buffer<lowp16>> staging_pool_;  // every staging buffer allocated
  std::vector<int> pool_owner_;               // per pool buffer: the bucket it stages this step, -1: free
  std::vector<int> staging_of_bucket_;        // per bucket: its pool buffer this step, -1: none yet
  // Per bucket: the padding between its tensors, bucket-relative. Backward
  // writes every tensor, so only these are zeroed in a reused staging buffer.
  std::vector<std::vector<GradientSegment>> bucket_gaps_;
  LayerHooks hooks_;
  size_t elements_gathered_ = 0;
  CollectiveTrace* trace_ = nullptr;  // not owned
};

}  // namespace ddp
