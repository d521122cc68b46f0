// collective_trace.h: where a Communicator notes its FP16 collectives for
// --trace: what ran (the op, its elements, the gradient bucket or layer the
// caller tagged it with), when it was called and when it ran.
//
// The caller's thread opens a record at each call (open()), consuming the
// tag set just before (tag_next); the transport fills the times: a host
// transport from its own thread as the collective runs (the record stays
// put: a deque never moves its elements), a device transport by events it
// resolves in resolve_trace_times(). The owner reads and clears the
// records only after Communicator::wait_allreduces(), so no write is left;
// a host transport's queued job holds its record too (shared), so one
// still queued when the trace goes (an exception unwinding) writes into a
// record of its own, not into freed memory.
#pragma once

#include <cstddef>
#include <deque>
#include <cstdint>
#include <limits>
#include <memory>

namespace ddp {

struct CollectiveRecord {
  const char* op = "";       // "all-reduce", "reduce-scatter", "all-gather"
  size_t elements = 0;       // elements of the whole buffer (the layout's total)
  size_t element_bytes = 2;  // on the wire: 16-bit words, or 4 (the FP32 sums of --grad-reduce-dtype fp32)
  int bucket = -1;           // the gradient bucket, or -1
  int layer = -1;            // the layer whose weights a ZeRO-3 gather brings, or -1
  int64_t step = 0;          // the traced step it was called in (0: between steps)
  // Host trace clock at the call. On a GPU the host queues ahead of the
  // device: compare it with host times only, not with the device's spans.
  double called_us = 0.0;
  double begin_us = std::numeric_limits<double>::quiet_NaN();
  double end_us = std::numeric_limits<double>::quiet_NaN();
  void* device_begin = nullptr;  // a device transport's events (cudaEvent_t), resolved later
  void* device_end = nullptr;
};

class CollectiveTrace {
 public:
  // Whether calls are recorded now (the trainer's --trace-steps window),
  // and the step they belong to (0: between steps, e.g. an evaluation's).
  bool active = false;
  int64_t step = 0;
  // A device transport times its events against these (stream_marks.h).
  void* device_origin = nullptr;
  double device_origin_us = 0.0;

  // The next collective is bucket `bucket`'s or layer `layer`'s (-1: none).
  void tag_next(int bucket, int layer) {
    next_bucket_ = bucket;
    next_layer_ = layer;
  }
  // A record for a collective called now, or null when not active. The
  // tag set before is consumed either way.
  std::shared_ptr<CollectiveRecord> open(const char* op, size_t elements, size_t element_bytes = 2);

  std::deque<std::shared_ptr<CollectiveRecord>>& records() { return records_; }
  void clear() { records_.clear(); }

 private:
  std::deque<std::shared_ptr<CollectiveRecord>> records_;
  int next_bucket_ = -1, next_layer_ = -1;
};

}  // namespace ddp
