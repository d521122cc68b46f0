// epoch_cursor.h: where the run is in the data. The position (epoch, global
// sample offset in it), the slices of this rank's order that a step reads,
// the order itself (cached for the current and the next epoch), where an
// epoch ends, and the batch a prefetch should fetch next.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/data/distributed_sampler.h"
#include "trainer/config/train_config.h"

namespace ddp {

// Where one step's samples lie: positions [local_pos, local_pos +
// step_rows) of this rank's order for `epoch`, in micro_batches
// consecutive slices of the batch size. The last step of an epoch may have
// fewer rows (and a shorter last slice).
struct StepSlice {
  int64_t epoch = 0, epoch_offset = 0, local_pos = 0, step_rows = 0, micro_batches = 0;
};

// Rows of this rank's order that one load reads (valid while the order is).
struct BatchRows {
  const uint32_t* indices = nullptr;
  int rows = 0;
};

class EpochCursor {
 public:
  // `cfg.batch_size` is per rank (resolve_batch_per_rank).
  EpochCursor(const TrainConfig& cfg, size_t train_samples, int rank, int world_size);

  int64_t epoch() const { return epoch_; }
  int64_t epoch_offset() const { return epoch_offset_; }  // global samples of the epoch already used
  const DistributedSampler& sampler() const { return sampler_; }
  int64_t samples_per_rank_step() const { return batch_size_ * grad_accum_; }
  // 0 when --drop-last leaves no full step (the caller says why).
  int64_t steps_per_epoch() const;

  // Moves to a checkpoint's position; the cached orders are dropped (the
  // seed, and with it the order, may change: reseed).
  void move_to(int64_t epoch, int64_t epoch_offset);
  // A resumed run takes the checkpoint's seed for the data order.
  void reseed(uint64_t seed);
  // After a step of `step_rows` rows on every rank.
  void advance(int64_t step_rows) { epoch_offset_ += step_rows * world_; }
  void next_epoch() {
    ++epoch_;
    epoch_offset_ = 0;
  }

  bool epoch_done() const { return epoch_done_at(epoch_offset_); }
  bool epoch_done_at(int64_t at_offset) const;

  StepSlice now() const { return slice_at(epoch_, epoch_offset_); }
  StepSlice slice_at(int64_t at_epoch, int64_t at_offset) const;
  // The step after `s`, moving to the next epoch as run() and bench() do
  // (epoch_done after the step: next epoch, offset 0).
  StepSlice slice_after(const StepSlice& s) const;
  int64_t micro_first(const StepSlice& s, int64_t micro) const { return s.local_pos + micro * batch_size_; }
  int micro_rows(const StepSlice& s, int64_t micro) const;

  // This rank's order for `at_epoch`, the current or the next epoch. A
  // reference to the current epoch's stays valid until a step starts in
  // another epoch.
  const std::vector<uint32_t>& order_for(int64_t at_epoch);

  // The batch that follows micro-batch `micro` of step `s`: the step's next
  // micro-batch, or the next step's first (in the next epoch's order after
  // an epoch's last step): what the next load() will ask for.
  BatchRows prefetch_target(const StepSlice& s, int64_t micro);

 private:
  DistributedSampler sampler_;
  size_t train_samples_;
  int rank_, world_;
  int64_t batch_size_, grad_accum_;
  bool shuffle_, drop_last_;
  int64_t epoch_ = 0, epoch_offset_ = 0;
  // This rank's order for indices_epoch_ (the current epoch) and for
  // next_indices_epoch_ (the next one, which the prefetch at an epoch's last
  // step reads first).
  std::vector<uint32_t> indices_, next_indices_;
  int64_t indices_epoch_ = -1, next_indices_epoch_ = -1;
};

// The run's length in steps and epochs, from --steps or --epochs.
struct RunPlan {
  int64_t steps_per_epoch = 0, total_steps = 0, epochs_total = 0;
};

// Throws ddp::Error when --drop-last leaves no full step or --epochs makes
// more than 2^40 steps.
RunPlan plan_run(const TrainConfig& cfg, const EpochCursor& cursor);

}  // namespace ddp
