// step_state_view.h: the host's view of the device-resident step state
// (kernels/step_status.h) and of this rank's last loss: when the host reads
// them (never to decide a step), the copy it read, and the --max-bad-steps
// ending it finds there.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "kernels/step_status.h"
#include "trainer/config/train_config.h"
#include "trainer/checkpoint/train_state.h"

namespace ddp {

// The loss scaler's part of the step state, one way and the other.
void set_scaler_state(StepStatus& status, const LossScalerState& scaler);
LossScalerState scaler_state_of(const StepStatus& status);

class StepStateView {
 public:
  // The host copy starts with the configured scaler's initial state.
  StepStateView(Backend& backend, const TrainConfig& cfg);

  StepStatus* device() { return status_dev_.data(); }      // (1) the step state, in the backend's memory
  float* loss_mean_device() { return loss_mean_.data(); }  // (1) this step's local mean loss
  // The host's copy as of the last read() (before prepare: the state upload() sends).
  const StepStatus& host() const { return status_; }
  StepStatus& host_to_upload() { return status_; }
  float loss() const { return status_loss_; }  // this rank's loss_mean, read with it

  // Sends the host copy to the device; it is then current as of `step`.
  void upload(int64_t step);
  // The host's copy of the step state (and this rank's last loss, for live
  // lines), read now unless already read at `step`: waits for the device.
  const StepStatus& read(int64_t step);

  // Whether the host reads the step state after step `step` (the count of
  // steps done) of `total_steps`. Every rank decides alike (never on
  // timing), so every rank sees a --max-bad-steps ending at the same step.
  bool due(int64_t step, int64_t total_steps, bool log_step, bool epoch_done) const;

  // The device counts consecutive skipped steps and records the step where
  // the run reached --max-bad-steps; seen at a read, it ends the run on
  // every rank (the skip decision is global, and so is the read schedule).
  // Throws AgreedError (trainer.h) then.
  void check_bad_steps() const;

 private:
  Backend& backend_;
  bool host_memory_;  // CPU backend: the state is host memory, read every step
  int64_t checkpoint_every_, max_bad_steps_;
  Buffer<StepStatus> status_dev_;
  StepStatus status_{};
  int64_t status_read_at_ = -1;  // step of that copy
  float status_loss_ = 0.0f;
  Buffer<float> loss_mean_;
};

}  // namespace ddp
