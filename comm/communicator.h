// communicator.h: the collectives the trainer needs, over whatever transport
// the build has (NCCL on GPUs, MPI on CPUs, nothing for a world of one).
// Buffers are the backend's memory; FP16 sums add in FP32 and round to FP16
// per step, as NCCL does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/half.h"

namespace ddp {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;

  // In place: every rank ends with the element-wise sum over ranks.
  virtual void allreduce_sum_fp16(half16* data, size_t count) = 0;
  // In place: rank `root`'s bytes everywhere.
  virtual void broadcast_bytes(void* data, size_t size_bytes, int root) = 0;
  // Host scalars (metrics), summed in double on every rank.
  virtual double allreduce_sum_host(double value) = 0;
  virtual void barrier() = 0;

  // Seconds the FP16 all-reduces took since the previous call (for the
  // metrics). Host-synchronous transports time the call; asynchronous ones
  // time their stream and may wait for it here, so call it at log time only.
  virtual double take_allreduce_seconds() { return 0.0; }
};

// A world of one: every collective is the identity.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "single process"; }
  void allreduce_sum_fp16(half16*, size_t) override {}
  void broadcast_bytes(void*, size_t, int) override {}
  double allreduce_sum_host(double value) override { return value; }
  void barrier() override {}
};

}  // namespace ddp
