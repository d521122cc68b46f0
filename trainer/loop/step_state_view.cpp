// step_state_view.cpp: reading the device step state (step_state_view.h).
#include "trainer/loop/step_state_view.h"

#include <cstdio>
#include <string>

#include "trainer/optim/loss_scaler.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {
// How often (in steps) the host reads the device-resident step state when
// nothing else asks for it (log steps, checkpoints and the end do): bounds
// how long a run goes on after --max-bad-steps was reached. On CPU the
// state is host memory and is read every step.
constexpr int64_t kStatusPollSteps = 50;
}  // namespace

void set_scaler_state(StepStatus& status, const LossScalerState& scaler) {
  status.scale = scaler.scale;
  status.growth_tracker = scaler.growth_tracker;
  status.hysteresis_left = scaler.hysteresis_left;
}

LossScalerState scaler_state_of(const StepStatus& status) {
  LossScalerState scaler;
  scaler.scale = status.scale;
  scaler.growth_tracker = status.growth_tracker;
  scaler.hysteresis_left = status.hysteresis_left;
  return scaler;
}

StepStateView::StepStateView(Backend& backend, const TrainConfig& cfg)
    : backend_(backend),
      host_memory_(backend.kind() == DeviceKind::Cpu),
      checkpoint_every_(cfg.checkpoint_every),
      max_bad_steps_(cfg.max_bad_steps),
      status_dev_(backend, 1),
      loss_mean_(backend, 1) {
  set_scaler_state(status_, LossScaler(cfg.loss_scaler).state());
}

void StepStateView::upload(int64_t step) {
  backend_.copy_to_device(status_dev_.data(), &status_, sizeof(StepStatus));
  status_read_at_ = step;
}

const StepStatus& StepStateView::read(int64_t step) {
  if (status_read_at_ != step) {
    backend_.copy_to_host(&status_, status_dev_.data(), sizeof(StepStatus));
    backend_.copy_to_host(&status_loss_, loss_mean_.data(), sizeof(status_loss_));
    status_read_at_ = step;
  }
  return status_;
}

bool StepStateView::due(int64_t step, int64_t total_steps, bool log_step, bool epoch_done) const {
  return host_memory_ || log_step || step % kStatusPollSteps == 0 || epoch_done ||
         (checkpoint_every_ > 0 && step % checkpoint_every_ == 0) || step >= total_steps;
}

void StepStateView::check_bad_steps() const {
  if (status_.giveup_step == 0) return;
  const int64_t n = max_bad_steps_, last = status_.giveup_step;
  char scale_text[32];
  std::snprintf(scale_text, sizeof scale_text, "%g", status_.giveup_scale);
  throw AgreedError(std::to_string(n) + " consecutive steps (" + std::to_string(last - n + 1) + " to " +
                    std::to_string(last) + ") were skipped for non-finite gradients, the last at loss " + "scale " +
                    scale_text + "; giving up (--max-bad-steps " + std::to_string(max_bad_steps_) + ")");
}

}  // namespace ddp
