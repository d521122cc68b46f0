// graph_safe_growth.h: when a device buffer that grows on demand (the GEMM's
// FP32 accumulator scratch and bias staging, CudaBackend's reduction
// scratch) may grow. Growing frees the old block; a CUDA graph captured
// earlier keeps its raw pointer and would read freed memory at its next
// replay. Inside a capture, the cudaMalloc and the stream sync before the
// free are not allowed at all. The trainer captures only after one eager
// step of the captured shape (and evaluates at most that batch), so neither
// happens there; this makes a new caller that breaks the rule fail loudly
// instead of corrupting memory. Plain C++, so its tests run without a GPU.
#pragma once

#include <cstddef>
#include <string>

namespace ddp {

enum class CaptureState {
  kNone,       // no capture has been made: growing is safe
  kCapturing,  // a stream capture is in progress
  kCaptured,   // at least one captured graph exists (and may be replayed)
};

// Throws ddp::Error, naming `buffer` and both sizes, when growing from
// from_bytes to to_bytes is unsafe in `state`: always inside a capture;
// after one when there is an old block to free (from_bytes > 0). A buffer
// that does not grow (to_bytes <= from_bytes) always passes.
void require_buffer_may_grow(CaptureState state, const std::string& buffer, size_t from_bytes, size_t to_bytes);

}  // namespace ddp
