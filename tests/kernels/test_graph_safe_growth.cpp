// test_graph_safe_growth.cpp: the rule of graph_safe_growth.h (when a
// grown-on-demand device buffer may be reallocated around CUDA graph
// captures), without a GPU. CudaKernels.BufferGrowthAroundACaptureIsRefused
// checks that the CUDA buffers apply it.
#include <gtest/gtest.h>

#include <string>

#include "kernels/error.h"
#include "kernels/graph_safe_growth.h"

namespace ddp {
namespace {

// The message of the Error `grow` throws; "" when it throws none.
template <class F>
std::string error_of(F&& grow) {
  try {
    grow();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GraphSafeGrowth, GrowingBeforeAnyCaptureIsAllowed) {
  EXPECT_NO_THROW(require_buffer_may_grow(CaptureState::kNone, "scratch", 0, 1024));
  EXPECT_NO_THROW(require_buffer_may_grow(CaptureState::kNone, "scratch", 1024, 1 << 20));
}

TEST(GraphSafeGrowth, NotGrowingIsAlwaysAllowed) {
  for (CaptureState s : {CaptureState::kNone, CaptureState::kCapturing, CaptureState::kCaptured}) {
    EXPECT_NO_THROW(require_buffer_may_grow(s, "scratch", 4096, 4096));
    EXPECT_NO_THROW(require_buffer_may_grow(s, "scratch", 4096, 16));
    EXPECT_NO_THROW(require_buffer_may_grow(s, "scratch", 0, 0));
  }
}

TEST(GraphSafeGrowth, GrowingInsideACaptureIsRefusedWithBothSizes) {
  for (size_t from : {size_t{0}, size_t{4096}}) {
    const std::string what =
        error_of([&] { require_buffer_may_grow(CaptureState::kCapturing, "GEMM FP32 scratch", from, 65536); });
    EXPECT_NE(what.find("GEMM FP32 scratch would grow from " + std::to_string(from) +
                        " to 65536 bytes inside a CUDA "
                        "graph capture"),
              std::string::npos)
        << what;
  }
}

TEST(GraphSafeGrowth, GrowingAfterACaptureIsRefusedWhenItWouldFreeTheOldBlock) {
  const std::string what =
      error_of([] { require_buffer_may_grow(CaptureState::kCaptured, "reduction scratch", 4096, 65536); });
  EXPECT_NE(what.find("reduction scratch would grow from 4096 to 65536 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  // Nothing allocated yet: nothing a graph could hold is freed.
  EXPECT_NO_THROW(require_buffer_may_grow(CaptureState::kCaptured, "reduction scratch", 0, 65536));
}

}  // namespace
}  // namespace ddp
