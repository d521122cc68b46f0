// cuda_stream_marks.h: StreamMarks (kernels/stream_marks.h) as CUDA events
// on the compute stream. mark() records an event (no wait); resolve_us()
// waits for it and adds its elapsed time since the origin event to the
// host time the origin was set at. The pool of events grows to the most
// marks between two clear()s and is reused after.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_raii.h"
#include "kernels/stream_marks.h"

namespace ddp {

class CudaStreamMarks final : public StreamMarks {
 public:
  explicit CudaStreamMarks(cudaStream_t stream);
  void set_origin() override;
  size_t mark() override;
  double resolve_us(size_t mark) override;
  void clear() override { used_ = 0; }
  void* device_origin() const override { return origin_.get(); }
  double device_origin_us() const override { return origin_us_; }

 private:
  cudaStream_t stream_;
  UniqueCudaEvent origin_;
  double origin_us_ = 0.0;
  std::vector<UniqueCudaEvent> events_;
  size_t used_ = 0;
};

// Microseconds from `origin` to `event` (both recorded, same device), after
// waiting for `event`: shared by the marks and the NCCL transport's trace.
double cuda_event_us_since(cudaEvent_t origin, cudaEvent_t event);

}  // namespace ddp
