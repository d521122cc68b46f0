// fault_hooks.cpp: overflow injection and the stalled rank (fault_hooks.h).
#include "trainer/loop/fault_hooks.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace ddp {

bool overflow_injected_at(const TrainConfig& cfg, int rank, int64_t step_1based) {
  if (rank != cfg.inject_overflow_rank) return false;
  if (cfg.inject_overflow_every > 0 && step_1based % cfg.inject_overflow_every == 0) return true;
  return std::find(cfg.inject_overflow_steps.begin(), cfg.inject_overflow_steps.end(), step_1based) !=
         cfg.inject_overflow_steps.end();
}

void inject_overflow(Backend& backend, half16* grads_fp16) {
  const half16 inf{0x7C00};
  backend.copy_to_device(grads_fp16, &inf, sizeof inf);
}

void stall_if_asked(const TrainConfig& cfg, int rank, int64_t step_1based) {
  if (cfg.stall_at_step <= 0 || cfg.stall_at_step != step_1based || rank != cfg.stall_rank) return;
  std::fprintf(stderr, "ddp_train: rank %d stalls before step %lld (--stall-at-step)\n", rank,
               static_cast<long long>(step_1based));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace ddp
