// resume_check.cpp
#include "trainer/checkpoint/resume_check.h"

#include <algorithm>
#include <cstdio>

#include "trainer/checkpoint/checkpoint.h"

namespace ddp {
namespace {
std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}
}  // namespace

std::vector<std::string> check_resume_fits(const TrainState& s, const ResumeTarget& run, const std::string& path) {
  std::vector<std::string> notes;
  const bool other_data = s.train_samples != 0 && s.train_samples != run.train_samples;
  const std::string where =
      "epoch " + std::to_string(s.epoch + 1) + ", sample " + std::to_string(s.epoch_sample_offset) + " of the epoch";
  // The offset counts global samples of the epoch already trained on. Rank r
  // takes positions r, r + N, ... of the epoch's order, so its share of the
  // first `offset` positions is offset / N rows, exactly only if N divides it.
  if (s.epoch_sample_offset >= run.epoch_samples) {
    throw CheckpointError(
        path, "its position (" + where + ") lies past this run's epoch of " + std::to_string(run.epoch_samples) +
                  " samples" +
                  (other_data ? " (it was written on a training set of " + std::to_string(s.train_samples) +
                                    " samples, this run's has " + std::to_string(run.train_samples) + ")"
                              : std::string()) +
                  "; resume on the data it was written with, or start a new run from its weights");
  }
  if (s.epoch_sample_offset % run.world_size != 0) {
    throw CheckpointError(path, "its position (" + where + ") does not divide among " + std::to_string(run.world_size) +
                                    " ranks; resume with a world size that " +
                                    "divides it (it was written with global batch " + std::to_string(s.global_batch) +
                                    ")");
  }
  if (other_data)
    notes.push_back("resume: " + path + " was written on a training set of " + std::to_string(s.train_samples) +
                    " samples, this run's has " + std::to_string(run.train_samples) + "; continuing at " + where +
                    " in this run's data order");
  if (s.global_batch != 0 && s.global_batch != run.global_batch)
    notes.push_back("resume: the checkpoint was written with global batch " + std::to_string(s.global_batch) +
                    ", this run's is " + std::to_string(run.global_batch) +
                    " (the LR schedule continues by step, the data by sample)");
  if (s.step >= run.total_steps)
    notes.push_back("resume: the checkpoint is at step " + std::to_string(s.step) + ", this run ends at step " +
                    std::to_string(run.total_steps) + " (--steps/--epochs): nothing left to train");
  return notes;
}

LossScalerState resumed_scaler_state(const TrainState& s, const ResumeTarget& run, std::vector<std::string>& notes) {
  const LossScalerConfig& c = run.loss_scaler;
  if (c.mode != LossScaleMode::Dynamic) {
    // A fixed scale is this run's flag; the checkpoint's is replaced.
    LossScalerState fixed;
    fixed.scale = c.mode == LossScaleMode::None ? 1.0 : c.init_scale;
    fixed.growth_tracker = 0;
    fixed.hysteresis_left = c.hysteresis;
    if (fixed.scale != s.scaler.scale)
      notes.push_back("resume: the loss scale is " + number(fixed.scale) + " (--loss-scale " +
                      (c.mode == LossScaleMode::None ? std::string("none") : "static:" + number(c.init_scale)) +
                      "), not the checkpoint's " + number(s.scaler.scale));
    return fixed;
  }
  const std::string trained_in = s.precision.empty() ? "fp16" : s.precision;
  if (trained_in != precision_name(run.precision)) {
    LossScalerState fresh;
    fresh.scale = c.init_scale;
    fresh.growth_tracker = 0;
    fresh.hysteresis_left = c.hysteresis;
    notes.push_back("resume: the checkpoint trained in " + trained_in + ", this run in " +
                    precision_name(run.precision) + ": the dynamic loss scale starts at --init-scale " +
                    number(c.init_scale) + ", not at the checkpoint's " + number(s.scaler.scale));
    return fresh;
  }
  LossScalerState state = s.scaler;
  if (run.given_flags.count("init-scale") && c.init_scale != s.scaler.scale)
    notes.push_back("resume: --init-scale " + number(c.init_scale) + " is not used: the dynamic loss scale " +
                    "continues from the checkpoint's " + number(s.scaler.scale));
  // --hysteresis applies from the resume on: no more overflows tolerated than it allows.
  state.hysteresis_left = std::min(state.hysteresis_left, c.hysteresis);
  if (c.min_scale > 0 && state.scale < c.min_scale) {
    notes.push_back("resume: the checkpoint's loss scale " + number(state.scale) + " is raised to --min-loss-scale " +
                    number(c.min_scale));
    state.scale = c.min_scale;
  }
  return state;
}

}  // namespace ddp
