// step_status.h: the per-step state that lives on the device so that a
// training step needs no host synchronisation: the loss scale and its
// counters, this step's Inf/NaN flag, whether the momentum buffer is
// initialised, the optimizer steps actually taken (AdamW's t), and the
// counts the host reports (skipped steps, the current run of skipped
// steps). The host reads a copy only when it logs, saves or
// ends (Trainer), never to decide a step.
//
// The rule (loss_scale_rule_update) is written once here and called by the
// host LossScaler (its tests: test_loss_scaler.cpp), the CPU backend and the
// CUDA kernel alike, so the three cannot drift apart.
#pragma once

#include <cstdint>

#include "kernels/half.h"
#include "kernels/host_device.h"

namespace ddp {

// The loss-scale rule's parameters (LossScalerConfig as plain data).
struct LossScaleRule {
  int32_t dynamic = 1;  // 0: static or none (the scale never changes)
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  double min_scale = 0.0;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;
  int64_t max_bad_steps = 0;  // > 0: record where the run of skipped steps first reaches it
};

// dynamic (PyTorch GradScaler when hysteresis == 1 and min_scale == 0,
// Megatron's DynamicGradScaler when hysteresis > 1):
//   overflow: growth_tracker = 0; hyst -= 1;
//             if hyst <= 0: scale = max(scale * backoff, min_scale)
//   clean:    growth_tracker += 1; when it reaches growth_interval:
//             growth_tracker = 0; hyst = H; scale *= growth, unless that
//             overflows FP32 (PyTorch keeps the scale then; so the scale is
//             never Inf)
DDP_HD void loss_scale_rule_update(const LossScaleRule& r, bool found_nonfinite, double& scale, int64_t& growth_tracker,
                                   int64_t& hysteresis_left) {
  if (!r.dynamic) return;
  if (found_nonfinite) {
    growth_tracker = 0;
    hysteresis_left -= 1;
    if (hysteresis_left <= 0) {
      const double backed_off = scale * r.backoff_factor;
      scale = backed_off > r.min_scale ? backed_off : r.min_scale;
    }
    return;
  }
  growth_tracker += 1;
  if (growth_tracker >= r.growth_interval) {
    growth_tracker = 0;
    hysteresis_left = r.hysteresis;
    const double grown = scale * r.growth_factor;
    if (is_finite_float(static_cast<float>(grown))) scale = grown;
  }
}

// Device-resident; 8-byte fields first so the layout is the same for g++
// and nvcc. Zero-initialise, then set scale / hysteresis_left (or restore).
struct StepStatus {
  double scale;             // loss scale S of the next step
  int64_t growth_tracker;   // clean steps since the last growth/backoff
  int64_t hysteresis_left;  // overflows still tolerated before a backoff
  int64_t steps_done;       // global steps taken (skipped ones count)
  int64_t skipped_total;    // skipped steps in the whole run (resumes continue it)
  int64_t bad_streak;       // consecutive skipped steps up to now
  int64_t giveup_step;      // 0, or the step (1-based) whose skip made bad_streak reach max_bad_steps
  double giveup_scale;      // the scale that step ran with
  double step_scale;        // the scale the last prepared step runs with
  int64_t steps_taken;      // optimizer steps taken, skipped ones not counted: AdamW's bias-correction t
                            // (GradScaler skips optimizer.step(), so torch's step count stays too)
  float backward_scale;     // this step: S / (micro-batches x predivide), for the loss gradient
  float inv_scale;          // this step: 1 / (S x N / predivide), for unscaling the summed gradients
  float lr;                 // this step's learning rate (the host's schedule)
  int32_t nonfinite;        // this step: set by the check, consumed by step_status_finish
  int32_t momentum_initialized;
  int32_t last_skipped;  // whether the last finished step was skipped
};

// Before a step (queued by the host with this step's values, outside any
// captured graph): the step's scalars from the current scale, in double then
// rounded once to float, exactly as the host computed them before they moved
// here (so results are bitwise unchanged).
DDP_HD void step_status_prepare(StepStatus& s, double backward_divisor, double unscale_divisor, float lr) {
  s.step_scale = s.scale;
  s.lr = lr;
  s.backward_scale = static_cast<float>(s.scale / backward_divisor);
  s.inv_scale = static_cast<float>(1.0 / (s.scale * unscale_divisor));
}

// After the optimizer step: consumes the Inf/NaN flag (and clears it for the
// next step), updates the scale and the counts.
DDP_HD void step_status_finish(const LossScaleRule& r, StepStatus& s) {
  const bool skipped = s.nonfinite != 0;
  s.nonfinite = 0;
  s.last_skipped = skipped ? 1 : 0;
  s.steps_done += 1;
  if (skipped) {
    s.skipped_total += 1;
    s.bad_streak += 1;
    if (r.max_bad_steps > 0 && s.bad_streak == r.max_bad_steps && s.giveup_step == 0) {
      s.giveup_step = s.steps_done;
      s.giveup_scale = s.step_scale;
    }
  } else {
    s.bad_streak = 0;
    s.momentum_initialized = 1;
    s.steps_taken += 1;
  }
  loss_scale_rule_update(r, skipped, s.scale, s.growth_tracker, s.hysteresis_left);
}

// A float operand given either by value (tests, eager callers) or as a
// pointer into the backend's memory (the step's scalars above), read by the
// kernel itself so a queued or captured step sees the value current when it
// runs. Implicit from float, so value callers read as before.
struct ScalarArg {
  float value = 0.0f;
  const float* ptr = nullptr;
  DDP_HD ScalarArg(float v) : value(v) {}  // NOLINT(google-explicit-constructor): a value is a ScalarArg
  static ScalarArg at(const float* p) {
    ScalarArg a(0.0f);
    a.ptr = p;
    return a;
  }
  DDP_HD float get() const { return ptr ? *ptr : value; }
};

}  // namespace ddp
