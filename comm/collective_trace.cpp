// collective_trace.cpp
#include "comm/collective_trace.h"

#include "kernels/stream_marks.h"

namespace ddp {

std::shared_ptr<CollectiveRecord> CollectiveTrace::open(const char* op, size_t elements, size_t element_bytes) {
  const int bucket = next_bucket_, layer = next_layer_;
  next_bucket_ = next_layer_ = -1;
  if (!active) return nullptr;
  auto r = std::make_shared<CollectiveRecord>();
  r->op = op;
  r->elements = elements;
  r->element_bytes = element_bytes;
  r->bucket = bucket;
  r->layer = layer;
  r->step = step;
  r->called_us = trace_clock_us();
  records_.push_back(r);
  return r;
}

}  // namespace ddp
