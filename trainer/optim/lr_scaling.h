// lr_scaling.h: --lr-scaling none|linear|sqrt with --base-batch B. The
// learning rate given (--lr) is the one for global batch B; the run's rate is
// that, scaled to its own global batch G:
//   linear: lr * G / B        (Goyal et al. 2017, "Accurate, Large Minibatch
//                              SGD": with a warm-up, --warmup-steps)
//   sqrt:   lr * sqrt(G / B)  (common for Adam-type optimizers)
// so a scaling experiment that changes the number of ranks keeps one recipe.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

enum class LrScaling { None, Linear, Sqrt };

LrScaling parse_lr_scaling(const std::string& text);  // throws ddp::Error naming --lr-scaling
const char* lr_scaling_name(LrScaling rule);

// The rate for `global_batch` from `lr` at `base_batch` (both > 0 unless None).
double scaled_lr(double lr, LrScaling rule, int64_t base_batch, int64_t global_batch);

}  // namespace ddp
