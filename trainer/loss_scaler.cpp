// loss_scaler.cpp
#include "trainer/loss_scaler.h"

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

void LossScaler::update(bool found_nonfinite) {
  if (config_.mode != LossScaleMode::Dynamic) return;
  if (found_nonfinite) {
    state_.growth_tracker = 0;
    state_.hysteresis_left -= 1;
    if (state_.hysteresis_left <= 0) state_.scale = std::max(state_.scale * config_.backoff_factor, config_.min_scale);
    return;
  }
  state_.growth_tracker += 1;
  if (state_.growth_tracker >= config_.growth_interval) {
    state_.growth_tracker = 0;
    state_.hysteresis_left = config_.hysteresis;
    const double grown = state_.scale * config_.growth_factor;
    // PyTorch keeps the scale when growth would overflow FP32; we do the same
    // at FP32's limit so the scale never becomes Inf.
    if (std::isfinite(static_cast<float>(grown))) state_.scale = grown;
  }
}

}  // namespace ddp
