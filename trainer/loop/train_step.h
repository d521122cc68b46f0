// train_step.h: one optimizer step of the loop, and what only the step
// reads: K micro-batches forward and backward into the flat FP16
// gradients, the bucketed all-reduce started as backward finishes each
// bucket (or ZeRO's reduce-scatter and layer gathers), the optimizer and
// the loss-scale update on the device; eager, or replayed from a
// --cuda-graph capture. It owns the batch loader, the LR schedule, the
// reducer, the optimizer and the loss-scale rule, the ZeRO hooks and the
// capture; the Trainer (trainer_impl.h) owns what the loop's other parts
// share with it (the model, the parameter store, the step state, the epoch
// cursor) and hands them over built.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/collective_watchdog.h"
#include "comm/communicator.h"
#include "comm/gradient_reducer.h"
#include "kernels/backend.h"
#include "trainer/config/train_config.h"
#include "trainer/data/batch_loader.h"
#include "trainer/data/dataset.h"
#include "trainer/loop/captured_step.h"
#include "trainer/loop/epoch_cursor.h"
#include "trainer/loop/step_state_view.h"
#include "trainer/models/model.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/mixed_precision_optimizer.h"
#include "trainer/params/parameter_store.h"
#include "trainer/params/tensor_table.h"
#include "trainer/report/progress_reporter.h"
#include "trainer/report/step_trace.h"
#include "trainer/zero/layer_shards.h"

namespace ddp {

class TrainStep {
 public:
  // What a step did, for the loop's log line.
  struct Result {
    StepOutcome outcome;  // grad_norm when logged; the skip decision is in the step state
    int64_t rows = 0;     // this rank's samples in the step
    double lr = 0;
    bool log_step = false;
  };

  // The parts it shares with the loop, built (all outlive it): the bound
  // config, the model and its store (sharded by `shards` at --zero), the
  // step state, the cursor over `train`, the run's plan (its total steps:
  // the LR schedule's length and the last step's log line).
  TrainStep(const TrainConfig& cfg, Backend& backend, Communicator& comm, Model& model, ParameterStore& params,
            const ShardLayout& shards, StepStateView& state, EpochCursor& cursor, const Dataset& train,
            const RunPlan& plan, ProgressReporter& progress);

  // The step that makes the count `step` + 1: its micro-batches, sums,
  // update and loss-scale update, queued; the cursor is advanced past its
  // rows. Evaluation and checkpoints are the loop's.
  Result run(int64_t step);

  // `use` with a table of the whole FP16 weights: the training table, or at
  // --zero 3 a transient gather of them (a collective: every rank calls it,
  // at the loop's `step`).
  void with_whole_weights(int64_t step, const std::function<void(const WeightTable&)>& use);

  // --trace: the reducer's and the layer gathers' collectives go to
  // `tracer`'s timeline, and the step's spans to it (null: not traced).
  void set_tracer(StepTracer* tracer);
  // Collectives that may wait on a peer are watched (null: not watched).
  void watch_collectives(CollectiveWatchdog* watchdog) { watchdog_ = watchdog; }
  // Test hook: each micro-batch's row indices, before they are loaded.
  void observe_batches(std::function<void(const uint32_t*, int)> observer) { batch_observer_ = std::move(observer); }

  // What --bench, the memory line and the log read of the step's parts.
  const GradientReducer& reducer() const { return reducer_; }
  // Bytes of one element of the gradients' sums on the wire (2, or 4 with --grad-reduce-dtype fp32).
  size_t reduce_wire_bytes() const { return reducer_.wire_element_bytes(); }
  size_t elements_reduced() const { return reducer_.elements_started(); }
  size_t elements_gathered() const;
  size_t zero_buffer_bytes() const {
    return (layer_shards_ ? layer_shards_->buffer_bytes() : 0) + reducer_.fp32_staging_bytes();
  }
  bool graphs_enabled() const { return captured_.enabled(); }
  int64_t graph_replays() const { return captured_.replays(); }
  BatchLoaderCounts loader_counts() const { return loader_.counts(); }

 private:
  // Forward, loss and backward of one micro-batch (`batch`, in an upload
  // slot). Only the last micro-batch's backward finishes gradients (no_sync
  // before it): its finished buckets start their all-reduces at once.
  void micro_batch_pass(const DeviceBatch& batch, int rows, int64_t micro, int64_t micro_batches);
  // What a --cuda-graph capture records: the step of one full micro-batch
  // on the graph's own input batch, without host reads.
  void captured_pass(const DeviceBatch& fixed);
  // The sums, then the optimizer step and the loss-scale update. The sum
  // over ranks was predivided by F: what is left to divide is N/F (prepared
  // as the step's 1/(S N/F)).
  StepOutcome reduce_and_update(bool log_step);
  // Starts the copy of the batch that follows micro-batch `micro` of step
  // `s`: what the next load() will ask for. Where there is no next load
  // (the run's last step, a stop) the copy is wasted; a load of other rows
  // would still get exactly those rows (BatchLoader::load), so prefetching
  // never changes a result.
  void prefetch_after(const StepSlice& s, int64_t micro);
  // --zero (train_step_shards.cpp): the reducer, the layer hooks and the
  // padding for the stage.
  void wire_shards(const ShardLayout& shards);

  const TrainConfig& cfg_;
  Backend& backend_;
  Communicator& comm_;
  Model& model_;
  ParameterStore& params_;
  StepStateView& state_;
  EpochCursor& cursor_;
  const RunPlan& plan_;
  MixedPrecisionOptimizer optimizer_;
  LossScaleRule scale_rule_;
  BatchLoader loader_;
  LrSchedule schedule_;
  GradientReducer reducer_;  // the all-reduce buckets over the registry's tensors, overlapped with backward
  // params' buffers per tensor, as the model reads them (params/tensor_table.h);
  // at --zero 2 and 3 the sharded ones are the layer hooks' (layer_shards.h).
  ParameterTables tables_;
  std::unique_ptr<LayerShards> layer_shards_;  // --zero 1-3: the hooks that stage gradients and gather weights
  bool overlap_update_gathers_ = false;        // stages 1 and 2 (uncaptured): layer_shards_ gathers after the update
  // --zero >= 1 with whole FP16 gradients: the padding between tensors, as
  // (offset, count). An in-place reduce-scatter leaves other ranks' sums in
  // a rank's buffer (MPI_IN_PLACE's scratch), padding included, and
  // backward writes only tensors: these are zeroed before each step's sums,
  // so the padding's sum stays zero (it is in some rank's range: its check,
  // its norm).
  std::vector<GradientSegment> padding_gaps_;
  CapturedStep captured_;
  StepTracer* tracer_ = nullptr;                              // not owned
  CollectiveWatchdog* watchdog_ = nullptr;                    // not owned
  std::function<void(const uint32_t*, int)> batch_observer_;  // test hook; may be empty
  int64_t step_ = 0;  // the count before the step running (the hooks' step + 1 is its number)
};

}  // namespace ddp
