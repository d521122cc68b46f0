// resume_check.h: whether a checkpoint's state fits the run that resumes
// from it (its data set, world size and global batch, its flags), beyond
// the checks of the file itself (checkpoint.h) and of its fields' ranges
// (checkpoint_validation.h). A position that does not fit is refused; what
// differs but still fits, and every flag the resume overrides or cannot
// honour, is named in one line.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kernels/lowp_codec.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/checkpoint/train_state.h"

namespace ddp {

struct ResumeTarget {
  int world_size = 1;
  uint64_t train_samples = 0;  // this run's training set
  int64_t epoch_samples = 0;   // global samples per epoch: per-rank share x world (padded or dropped)
  int64_t global_batch = 0;
  int64_t total_steps = 0;
  LossScalerConfig loss_scaler;
  Precision precision = Precision::Fp16;
  std::set<std::string> given_flags;  // flags the user set (not defaulted)
};

// Throws CheckpointError(path, ...) when the checkpoint's epoch position lies
// past this run's epoch or does not divide among its ranks. Returns the
// lines to print about what differs (data set size, global batch, a run
// already past its end).
std::vector<std::string> check_resume_fits(const TrainState& s, const ResumeTarget& run, const std::string& path);

// The loss scaler state a resumed run starts from: the checkpoint's with
// dynamic scaling (hysteresis capped at this run's --hysteresis) unless the
// checkpoint trained in another precision (its scale, 1 for a bf16 run
// without scaling, is no FP16 scale: the dynamic scale starts afresh at
// --init-scale), this run's fixed scale with static:<S> or none. Appends a line for each flag the
// checkpoint overrides (--init-scale) or that replaces the checkpoint's value.
LossScalerState resumed_scaler_state(const TrainState& s, const ResumeTarget& run, std::vector<std::string>& notes);

}  // namespace ddp
