// simt_executor.h: the executor's state that its access checks read
// (simt_access_check.cpp): the running CUDA thread, its warp's
// synchronisation count, the block's dynamic shared memory, and the one
// way to report a broken rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::simt {

struct RunningThread {
  int linear;  // index in the block: x + y * bx + z * bx * by
  int warp;    // linear / 32
  uintptr_t stack_lo;
  uintptr_t stack_hi;
};

// nullptr outside a kernel.
const RunningThread* running_thread();
// How many __syncwarp()s the warp has completed in this block.
uint32_t warp_sync_count(int warp);
// Whether a __syncwarp() completed after the first `since` of the warp
// named both lanes in its mask (lane_a and lane_b are linear indices).
bool warp_synced_since(int warp, uint32_t since, int linear_a, int linear_b);
int warp_of(int linear);
// "thread (3,1,0)" (the block is named once, in the failure's prefix).
std::string thread_name(int linear);
// "the __syncthreads() at file:line" or "the block's start".
std::string last_barrier_name();

struct SharedRange {
  uintptr_t base;
  size_t bytes;
  size_t guard_bytes;  // on each side: an access there is out of bounds
};
SharedRange dynamic_shared_range();

// Records the launch's first broken rule; the threads stop at their next
// synchronisation point and launch_grid throws it, naming the kernel and
// the block.
void fail(const std::string& message);

}  // namespace ddp::simt
