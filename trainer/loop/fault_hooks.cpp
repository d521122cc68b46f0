// fault_hooks.cpp: overflow injection, the stalled rank and the checkpoint
// write's faults (fault_hooks.h).
#include "trainer/loop/fault_hooks.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "kernels/error.h"

namespace ddp {

bool overflow_injected_at(const TrainConfig& cfg, int rank, int64_t step_1based) {
  if (rank != cfg.inject_overflow_rank) return false;
  if (cfg.inject_overflow_every > 0 && step_1based % cfg.inject_overflow_every == 0) return true;
  return std::find(cfg.inject_overflow_steps.begin(), cfg.inject_overflow_steps.end(), step_1based) !=
         cfg.inject_overflow_steps.end();
}

void inject_overflow(Backend& backend, lowp16* grads_lowp) {
  // +Inf in the backend's format (FP16's bits are a finite number in BF16).
  const lowp16 inf =
      with_codec(backend.precision(), [](auto codec) { return codec.narrow(std::numeric_limits<float>::infinity()); });
  backend.copy_to_device(grads_lowp, &inf, sizeof inf);
}

void stall_if_asked(const TrainConfig& cfg, int rank, int64_t step_1based) {
  if (cfg.stall_at_step <= 0 || cfg.stall_at_step != step_1based || rank != cfg.stall_rank) return;
  std::fprintf(stderr, "ddp_train: rank %d stalls before step %lld (--stall-at-step)\n", rank,
               static_cast<long long>(step_1based));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

CheckpointWriteFault checkpoint_write_fault_from_env() {
  constexpr const char* kVariable = "DDP_TEST_CHECKPOINT_WRITE";
  const char* value = std::getenv(kVariable);
  CheckpointWriteFault fault;
  if (value == nullptr || *value == '\0') return fault;
  const std::string text = value;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const char* first = text.c_str() + (colon == std::string::npos ? text.size() : colon + 1);
  const char* last = text.c_str() + text.size();
  const auto [end, ec] = std::from_chars(first, last, fault.step);
  if (kind == "hold")
    fault.kind = CheckpointWriteFault::Kind::Hold;
  else if (kind == "fail")
    fault.kind = CheckpointWriteFault::Kind::Fail;
  else if (kind == "slow")
    fault.kind = CheckpointWriteFault::Kind::Slow;
  if (fault.kind == CheckpointWriteFault::Kind::None || first == last || ec != std::errc() || end != last ||
      fault.step < 0)
    throw Error(std::string(kVariable) + "='" + text + "' is not hold:STEP, fail:STEP or slow:STEP (a test hook)");
  return fault;
}

MidWriteHook checkpoint_write_hook(const CheckpointWriteFault& fault, int64_t step) {
  if (fault.kind == CheckpointWriteFault::Kind::Slow && step >= fault.step)
    return [] {
      std::this_thread::sleep_for(std::chrono::seconds(kSlowCheckpointWriteSeconds));
      return 0;
    };
  if (fault.kind == CheckpointWriteFault::Kind::None || fault.step != step) return {};
  if (fault.kind == CheckpointWriteFault::Kind::Fail) return [] { return EIO; };
  return [step] {
    std::fprintf(stderr,
                 "ddp_train: the write of step %lld's checkpoint holds half-written (DDP_TEST_CHECKPOINT_WRITE)\n",
                 static_cast<long long>(step));
    std::fflush(stderr);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    return 0;
  };
}

}  // namespace ddp
