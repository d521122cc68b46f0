// fault_hooks.h: the test hooks that make a run fail on purpose
// (--inject-overflow-*, --stall-rank/--stall-at-step), so the tests can
// check how the trainer and its peers behave when a step overflows or a
// rank hangs.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/half.h"
#include "trainer/config/train_config.h"

namespace ddp {

// Whether rank `rank` injects an overflow into step `step_1based`.
bool overflow_injected_at(const TrainConfig& cfg, int rank, int64_t step_1based);

// One +Inf in the first gradient element, as an FP16 overflow in backward
// would leave it; the all-reduce carries it to every rank.
void inject_overflow(Backend& backend, half16* grads_fp16);

// This rank stops taking part before step `step_1based`'s collectives, as a
// hung process would, when --stall-rank/--stall-at-step ask for it; its
// peers wait. Never returns then.
void stall_if_asked(const TrainConfig& cfg, int rank, int64_t step_1based);

}  // namespace ddp
