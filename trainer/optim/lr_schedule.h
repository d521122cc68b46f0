// lr_schedule.h: learning rate as a pure function of the iteration index
// (skipped steps count, as PyTorch schedulers do). A linear warm-up over the
// first W iterations ramps lr from base/W to base; the schedule then runs over
// the remaining T - W iterations:
//   constant: base
//   step:     base * gamma^floor((t - W) / step_size)
//   cosine:   base * (1 + cos(pi * (t - W) / (T - W))) / 2   (CosineAnnealingLR, eta_min 0)
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

enum class LrScheduleKind { Constant, Step, Cosine };

LrScheduleKind parse_lr_schedule(const std::string& text);  // throws ddp::Error naming --lr-schedule

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  double base_lr = 0.05;
  int64_t total_steps = 1;
  int64_t warmup_steps = 0;
  int64_t step_size = 0;  // step schedule: 0 means a third of the post-warm-up steps
  double gamma = 0.1;

  double lr_at(int64_t step) const;
};

}  // namespace ddp
