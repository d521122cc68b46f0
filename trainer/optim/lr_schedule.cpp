// lr_schedule.cpp
#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "kernels/error.h"

namespace ddp {

LrScheduleKind parse_lr_schedule(const std::string& text) {
  if (text == "constant") return LrScheduleKind::Constant;
  if (text == "step") return LrScheduleKind::Step;
  if (text == "cosine") return LrScheduleKind::Cosine;
  throw Error("--lr-schedule: '" + text + "' is not one of constant, step, cosine");
}

double LrSchedule::lr_at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps)
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t t = step - warmup_steps;
  const int64_t span = std::max<int64_t>(total_steps - warmup_steps, 1);
  switch (kind) {
    case LrScheduleKind::Constant:
      return base_lr;
    case LrScheduleKind::Step: {
      const int64_t size = step_size > 0 ? step_size : std::max<int64_t>(span / 3, 1);
      return base_lr * std::pow(gamma, static_cast<double>(t / size));
    }
    case LrScheduleKind::Cosine: {
      const double progress = std::min(static_cast<double>(t) / static_cast<double>(span), 1.0);
      return base_lr * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
  }
  return base_lr;
}

}  // namespace ddp
