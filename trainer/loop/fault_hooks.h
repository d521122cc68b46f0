// fault_hooks.h: the test hooks that make a run fail on purpose
// (--inject-overflow-*, --stall-rank/--stall-at-step, and the environment's
// DDP_TEST_CHECKPOINT_WRITE), so the tests can check how the trainer and its
// peers behave when a step overflows, a rank hangs, or a checkpoint write
// is cut short or fails.
#pragma once

#include <cstdint>

#include "trainer/io/atomic_file.h"

#include "kernels/backend.h"
#include "kernels/half.h"
#include "trainer/config/train_config.h"

namespace ddp {

// Whether rank `rank` injects an overflow into step `step_1based`.
bool overflow_injected_at(const TrainConfig& cfg, int rank, int64_t step_1based);

// One +Inf in the first gradient element, as an FP16 overflow in backward
// would leave it; the all-reduce carries it to every rank.
void inject_overflow(Backend& backend, lowp16* grads_lowp);

// This rank stops taking part before step `step_1based`'s collectives, as a
// hung process would, when --stall-rank/--stall-at-step ask for it; its
// peers wait. Never returns then.
void stall_if_asked(const TrainConfig& cfg, int rank, int64_t step_1based);

// DDP_TEST_CHECKPOINT_WRITE=hold:S, fail:S or slow:S, read from the
// environment (a test hook, so neither --help nor a --config shows it): the
// write of step S's checkpoint, once half its bytes are in the temporary
// file, holds there until the process is killed (a crash mid-write, on the
// writer thread with --async-checkpoint while training goes on), or fails
// there as a write(2) error (EIO) would; slow: every write from step S on
// pauses there kSlowCheckpointWriteSeconds and then completes (a large
// model's write, for the stop-signal tests). Unset or empty: no fault.
constexpr int kSlowCheckpointWriteSeconds = 3;
struct CheckpointWriteFault {
  enum class Kind { None, Hold, Fail, Slow };
  Kind kind = Kind::None;
  int64_t step = 0;
};
// Throws ddp::Error (one line) for a value that is not one of the above.
CheckpointWriteFault checkpoint_write_fault_from_env();

// The hook for the write of step `step`'s checkpoint (empty: no fault at
// that step). Holding, it first says so on stderr, for the test to wait on.
MidWriteHook checkpoint_write_hook(const CheckpointWriteFault& fault, int64_t step);

}  // namespace ddp
