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

struct AllreduceTimes {
  double busy_s = 0.0;
  double exposed_s = 0.0;

  AllreduceTimes& operator+=(const AllreduceTimes& o) {
    busy_s += o.busy_s, exposed_s += o.exposed_s;
    return *this;
  }
  // The share of the all-reduce time that ran behind backward, in [0, 1].
  double hidden_fraction() const {
    if (!(busy_s > 0.0)) return 0.0;
    const double f = 1.0 - exposed_s / busy_s;
    return f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
  }
};

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
  // A host integer's maximum over ranks (flags every rank must agree on).
  virtual int64_t allreduce_max_host(int64_t value) = 0;
  virtual void barrier() = 0;

  // Bucketed all-reduce, overlapped with backward: start an in-place FP16
  // sum of a bucket whose gradients the caller has finished (on a device:
  // queued), and return at once; wait_allreduces() makes every started sum
  // complete before the caller's next use of the buffers (host: returns
  // after them; device: orders the compute stream after them). Started
  // buckets must be disjoint and every rank starts the same ones in the same
  // order. The defaults are synchronous.
  virtual void start_allreduce_sum_fp16(half16* data, size_t count) { allreduce_sum_fp16(data, count); }
  virtual void wait_allreduces() {}

  // The FP16 all-reduces since the previous call, for the metrics: busy_s,
  // the time they took (host transports time the transfer; device ones their
  // stream); exposed_s, the part the caller stood waiting for them in
  // wait_allreduces (on a device, the compute stream's wait), i.e. not
  // hidden behind backward. May wait for the device: call at log time only.
  virtual AllreduceTimes take_allreduce_times() { return {}; }

  // Step capture (Backend::begin_capture): whether start/wait may be
  // recorded into a backend's capture (they are stream operations there),
  // and the capture's bounds, during which nothing is timed (a captured
  // timing event would never be recorded as such). Host transports cannot
  // be captured.
  virtual bool supports_capture() const { return false; }
  virtual void set_capturing(bool /*on*/) {}
  // Why supports_capture() is false, for the one-line error of --cuda-graph
  // (a clause: "--cuda-graph: " + reason); "" when it is true.
  virtual std::string capture_unsupported_reason() const {
    return supports_capture() ? "" : "the " + name() + " transport cannot be captured in a CUDA graph";
  }
};

// A world of one: every collective is the identity.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "single process"; }
  bool supports_capture() const override { return true; }  // nothing to capture
  void allreduce_sum_fp16(half16*, size_t) override {}
  void broadcast_bytes(void*, size_t, int) override {}
  double allreduce_sum_host(double value) override { return value; }
  int64_t allreduce_max_host(int64_t value) override { return value; }
  void barrier() override {}
};

}  // namespace ddp
