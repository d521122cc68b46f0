// stream_marks.h: points on the compute stream's timeline, for --trace.
//
// mark() notes where the compute stream now is and returns at once: on a
// CPU backend, whose calls return after their work, that is the host's
// clock now; on a GPU an event recorded on the stream, whose time is known
// only once the device has passed it. resolve_us() turns a mark into
// microseconds of the host's trace clock (trace_clock_us()), waiting for the
// device if it must, so the trainer resolves at log steps only and tracing
// adds no host synchronisation per step.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace ddp {

// The host clock every trace time is on: a steady clock, in microseconds.
inline double trace_clock_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class StreamMarks {
 public:
  virtual ~StreamMarks() = default;
  // Sets the device's zero to the host's now: call with the stream idle
  // (after Backend::synchronize), before any mark.
  virtual void set_origin() = 0;
  virtual size_t mark() = 0;
  virtual double resolve_us(size_t mark) = 0;
  // Forgets every mark (their numbers are reused); after resolving them.
  virtual void clear() = 0;
  // A device transport's collectives are timed against the same zero: its
  // origin event (a cudaEvent_t) and that event's host time; null on CPU.
  virtual void* device_origin() const { return nullptr; }
  virtual double device_origin_us() const { return 0.0; }
};

// The CPU backend's: the host's clock at each mark.
class HostStreamMarks final : public StreamMarks {
 public:
  void set_origin() override {}
  size_t mark() override {
    times_.push_back(trace_clock_us());
    return times_.size() - 1;
  }
  double resolve_us(size_t mark) override { return times_.at(mark); }
  void clear() override { times_.clear(); }

 private:
  std::vector<double> times_;
};

}  // namespace ddp
