// loss_scaler.h: dynamic / static / no loss scaling.
//
// dynamic (PyTorch GradScaler when hysteresis == 1 and min_scale == 0,
// Megatron's DynamicGradScaler when hysteresis > 1):
//   overflow: step skipped; growth_tracker = 0; hyst -= 1;
//             if hyst <= 0: scale = max(scale * backoff, min_scale)
//   clean:    growth_tracker += 1; when it reaches growth_interval:
//             growth_tracker = 0; hyst = H; scale *= growth
// static:<S> and none keep the scale fixed (S, or 1); a step with non-finite
// gradients is still skipped in every mode, so Inf never reaches a weight.
#pragma once

#include <string>

#include "kernels/step_status.h"
#include "trainer/optim/loss_scaler_state.h"

namespace ddp {

enum class LossScaleMode { Dynamic, Static, None };

struct LossScalerConfig {
  LossScaleMode mode = LossScaleMode::Dynamic;
  double init_scale = 65536.0;  // dynamic: initial S; static: S
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;
  double min_scale = 0.0;
};

// Parses "dynamic", "none" or "static:<S>" (S a positive finite number) into
// mode and, for static, init_scale. Throws ddp::Error naming the flag.
void parse_loss_scale_mode(const std::string& text, LossScalerConfig& config);

// The rule as plain data for the device-resident step state.
LossScaleRule loss_scale_rule(const LossScalerConfig& config, int64_t max_bad_steps = 0);

// The host-side scaler: the rule on one LossScalerState (tests, tools). The
// trainer keeps its scaler in the device-resident StepStatus instead.
class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config);
  // The scale to multiply this step's loss gradient by.
  double scale() const { return state_.scale; }
  // Called once per iteration with whether any gradient was non-finite.
  void update(bool found_nonfinite);

  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& state) { state_ = state; }
  const LossScalerConfig& config() const { return config_; }

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace ddp
