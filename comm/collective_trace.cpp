// collective_trace.cpp
#include "comm/collective_trace.h"

#include "kernels/stream_marks.h"

namespace ddp {

CollectiveRecord* CollectiveTrace::open(const char* op, size_t elements) {
  const int bucket = next_bucket_, layer = next_layer_;
  next_bucket_ = next_layer_ = -1;
  if (!active) return nullptr;
  CollectiveRecord& r = records_.emplace_back();
  r.op = op, r.elements = elements, r.bucket = bucket, r.layer = layer;
  r.called_us = trace_clock_us();
  return &r;
}

}  // namespace ddp
