// cuda_stream_marks.cpp
#include "kernels/cuda/cuda_stream_marks.h"

#include "kernels/cuda/cuda_check.h"

namespace ddp {
namespace {
UniqueCudaEvent make_event() {
  cudaEvent_t event = nullptr;
  DDP_CUDA_CHECK(cudaEventCreate(&event));  // timing enabled: the default flags
  return UniqueCudaEvent(event);
}
}  // namespace

double cuda_event_us_since(cudaEvent_t origin, cudaEvent_t event) {
  DDP_CUDA_CHECK(cudaEventSynchronize(event));
  float ms = 0.0f;
  DDP_CUDA_CHECK(cudaEventElapsedTime(&ms, origin, event));
  return 1e3 * static_cast<double>(ms);
}

CudaStreamMarks::CudaStreamMarks(cudaStream_t stream) : stream_(stream), origin_(make_event()) {}

void CudaStreamMarks::set_origin() {
  DDP_CUDA_CHECK(cudaEventRecord(origin_.get(), stream_));
  DDP_CUDA_CHECK(cudaEventSynchronize(origin_.get()));  // the stream is idle: at once
  origin_us_ = trace_clock_us();
}

size_t CudaStreamMarks::mark() {
  if (used_ == events_.size()) events_.push_back(make_event());
  DDP_CUDA_CHECK(cudaEventRecord(events_[used_].get(), stream_));
  return used_++;
}

double CudaStreamMarks::resolve_us(size_t mark) {
  return origin_us_ + cuda_event_us_since(origin_.get(), events_.at(mark).get());
}

}  // namespace ddp
