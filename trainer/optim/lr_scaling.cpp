// lr_scaling.cpp
#include "trainer/optim/lr_scaling.h"

#include <cmath>

#include "kernels/error.h"

namespace ddp {

LrScaling parse_lr_scaling(const std::string& text) {
  if (text == "none") return LrScaling::None;
  if (text == "linear") return LrScaling::Linear;
  if (text == "sqrt") return LrScaling::Sqrt;
  throw Error("--lr-scaling: '" + text + "' is not one of none, linear, sqrt");
}

const char* lr_scaling_name(LrScaling rule) {
  switch (rule) {
    case LrScaling::Linear:
      return "linear";
    case LrScaling::Sqrt:
      return "sqrt";
    case LrScaling::None:
      break;
  }
  return "none";
}

double scaled_lr(double lr, LrScaling rule, int64_t base_batch, int64_t global_batch) {
  if (rule == LrScaling::None) return lr;
  DDP_REQUIRE(base_batch > 0 && global_batch > 0, "scaled_lr: batches must be positive");
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(base_batch);
  return rule == LrScaling::Linear ? lr * ratio : lr * std::sqrt(ratio);
}

}  // namespace ddp
