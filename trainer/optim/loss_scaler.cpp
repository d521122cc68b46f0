// loss_scaler.cpp
#include "trainer/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/error.h"

namespace ddp {

void parse_loss_scale_mode(const std::string& text, LossScalerConfig& config) {
  if (text == "dynamic") {
    config.mode = LossScaleMode::Dynamic;
  } else if (text == "none") {
    config.mode = LossScaleMode::None;
  } else if (text.rfind("static:", 0) == 0) {
    const std::string number = text.substr(7);
    char* end = nullptr;
    const double s = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !std::isfinite(s) || s <= 0.0)
      throw Error("--loss-scale: '" + text + "' is not static:<S> with S a positive number");
    config.mode = LossScaleMode::Static;
    config.init_scale = s;
  } else {
    throw Error("--loss-scale: '" + text + "' is not one of dynamic, static:<S>, none");
  }
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  state_.scale = config.mode == LossScaleMode::None ? 1.0 : config.init_scale;
  state_.growth_tracker = 0;
  state_.hysteresis_left = config.hysteresis;
}

LossScaleRule loss_scale_rule(const LossScalerConfig& c, int64_t max_bad_steps) {
  LossScaleRule r;
  r.dynamic = c.mode == LossScaleMode::Dynamic ? 1 : 0;
  r.growth_factor = c.growth_factor;
  r.backoff_factor = c.backoff_factor;
  r.min_scale = c.min_scale;
  r.growth_interval = c.growth_interval;
  r.hysteresis = c.hysteresis;
  r.max_bad_steps = max_bad_steps;
  return r;
}

void LossScaler::update(bool found_nonfinite) {
  // The rule shared with the device-resident step state (step_status.h).
  loss_scale_rule_update(loss_scale_rule(config_), found_nonfinite, state_.scale, state_.growth_tracker,
                         state_.hysteresis_left);
}

}  // namespace ddp
