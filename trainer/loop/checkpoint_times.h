// checkpoint_times.h: what checkpoints cost the training loop, summed over
// the interval a step record covers (since the previous one) and over the
// run: the time the loop was blocked in checkpoint code, and with
// --async-checkpoint the part of it spent waiting for the previous
// background write and the time of the background writes that finished.
#pragma once

#include <cstdint>

namespace ddp {

struct CheckpointTimes {
  // In checkpoint code: synchronous, the whole checkpoint (host copy,
  // serialisation, write, sync, rename, pruning); --async-checkpoint, the
  // wait for the previous write and the host copy.
  double blocked_s = 0.0;
  double wait_s = 0.0;   // of blocked_s: waiting for a background write (--async-checkpoint)
  double write_s = 0.0;  // background writes that finished, from their start to their end (--async-checkpoint)

  CheckpointTimes& operator+=(const CheckpointTimes& other) {
    blocked_s += other.blocked_s;
    wait_s += other.wait_s;
    write_s += other.write_s;
    return *this;
  }
};

}  // namespace ddp
