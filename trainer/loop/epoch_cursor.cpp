// epoch_cursor.cpp: the run's position in the data (epoch_cursor.h).
#include "trainer/loop/epoch_cursor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/error.h"
#include "trainer/checkpoint/train_state.h"

namespace ddp {

EpochCursor::EpochCursor(const TrainConfig& cfg, size_t train_samples, int rank, int world_size)
    : sampler_(train_samples, rank, world_size, cfg.seed, cfg.shuffle, cfg.drop_last),
      train_samples_(train_samples),
      rank_(rank),
      world_(world_size),
      batch_size_(cfg.batch_size),
      grad_accum_(cfg.grad_accum),
      shuffle_(cfg.shuffle),
      drop_last_(cfg.drop_last) {}

int64_t EpochCursor::steps_per_epoch() const {
  const int64_t per_rank = static_cast<int64_t>(sampler_.samples_per_rank());
  const int64_t per_step = samples_per_rank_step();
  return drop_last_ ? per_rank / per_step : (per_rank + per_step - 1) / per_step;
}

void EpochCursor::move_to(int64_t epoch, int64_t epoch_offset) {
  epoch_ = epoch;
  epoch_offset_ = epoch_offset;
  indices_epoch_ = next_indices_epoch_ = -1;
}

void EpochCursor::reseed(uint64_t seed) {
  sampler_ = DistributedSampler(train_samples_, rank_, world_, seed, shuffle_, drop_last_);
  indices_epoch_ = next_indices_epoch_ = -1;
}

bool EpochCursor::epoch_done_at(int64_t at_offset) const {
  const int64_t per_rank = static_cast<int64_t>(sampler_.samples_per_rank());
  const int64_t used = at_offset / world_;
  return used >= per_rank || (drop_last_ && used + samples_per_rank_step() > per_rank);
}

StepSlice EpochCursor::slice_at(int64_t at_epoch, int64_t at_offset) const {
  const int64_t per_rank = static_cast<int64_t>(sampler_.samples_per_rank());
  StepSlice s;
  s.epoch = at_epoch;
  s.epoch_offset = at_offset;
  s.local_pos = at_offset / world_;
  s.step_rows = std::min<int64_t>(samples_per_rank_step(), per_rank - s.local_pos);
  s.micro_batches = (s.step_rows + batch_size_ - 1) / batch_size_;
  return s;
}

int EpochCursor::micro_rows(const StepSlice& s, int64_t micro) const {
  return static_cast<int>(std::min<int64_t>(batch_size_, s.local_pos + s.step_rows - micro_first(s, micro)));
}

StepSlice EpochCursor::slice_after(const StepSlice& s) const {
  const int64_t offset = s.epoch_offset + s.step_rows * world_;
  return epoch_done_at(offset) ? slice_at(s.epoch + 1, 0) : slice_at(s.epoch, offset);
}

const std::vector<uint32_t>& EpochCursor::order_for(int64_t at_epoch) {
  if (indices_epoch_ == at_epoch) return indices_;
  if (next_indices_epoch_ != at_epoch) {
    next_indices_ = sampler_.rank_indices(at_epoch);
    next_indices_epoch_ = at_epoch;
  }
  if (at_epoch != epoch_) return next_indices_;
  std::swap(indices_, next_indices_);
  std::swap(indices_epoch_, next_indices_epoch_);
  return indices_;
}

BatchRows EpochCursor::prefetch_target(const StepSlice& s, int64_t micro) {
  if (micro + 1 < s.micro_batches)
    return {order_for(s.epoch).data() + micro_first(s, micro + 1), micro_rows(s, micro + 1)};
  const StepSlice next = slice_after(s);
  return {order_for(next.epoch).data() + micro_first(next, 0), micro_rows(next, 0)};
}

RunPlan plan_run(const TrainConfig& cfg, const EpochCursor& cursor) {
  RunPlan plan;
  const int64_t per_rank = static_cast<int64_t>(cursor.sampler().samples_per_rank());
  plan.steps_per_epoch = cursor.steps_per_epoch();
  if (plan.steps_per_epoch == 0)
    throw Error("batch " + std::to_string(cfg.batch_size) + " x --grad-accum " + std::to_string(cfg.grad_accum) +
                " with --drop-last leaves no full step of the " + std::to_string(per_rank) + " samples per rank");
  // Bounded as --steps is (options_check.cpp), so step counts never overflow.
  if (cfg.steps == 0 && (__builtin_mul_overflow(cfg.epochs, plan.steps_per_epoch, &plan.total_steps) ||
                         plan.total_steps > kMaxTrainSteps))
    throw Error("--epochs " + std::to_string(cfg.epochs) + " x " + std::to_string(plan.steps_per_epoch) +
                " steps per epoch is more than 2^40 steps");
  if (cfg.steps > 0) plan.total_steps = cfg.steps;
  plan.epochs_total = (plan.total_steps + plan.steps_per_epoch - 1) / plan.steps_per_epoch;
  return plan;
}

}  // namespace ddp
