// graph_safe_growth.cpp: the rule of graph_safe_growth.h and its messages,
// which say what to do about it.
#include "kernels/graph_safe_growth.h"

#include "kernels/error.h"

namespace ddp {

void require_buffer_may_grow(CaptureState state, const std::string& buffer, size_t from_bytes, size_t to_bytes) {
  if (to_bytes <= from_bytes) return;
  const std::string growth =
      buffer + " would grow from " + std::to_string(from_bytes) + " to " + std::to_string(to_bytes) + " bytes";
  if (state == CaptureState::kCapturing)
    throw Error(growth +
                " inside a CUDA graph capture, where allocating is not allowed; run one eager step of the same "
                "shapes before capturing");
  if (state == CaptureState::kCaptured && from_bytes > 0)
    throw Error(growth +
                " after a CUDA graph capture, which would free memory a captured graph still uses; run the "
                "largest shapes eagerly before the first capture");
}

}  // namespace ddp
