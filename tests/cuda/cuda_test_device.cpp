// cuda_test_device.cpp: CudaBackend's memory (copies, fills) and the CUDA
// pieces that need no GPU: the checking macros' message (this file's name
// and line, the call, the library's text) and the device query that never
// throws. The CudaKernels test skips without a GPU; the others run wherever
// CUDA is built.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device_query.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- memory ---------------------------------------------------------------------

TEST_F(CudaKernels, MemoryCopiesAndFill) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const auto host = test::random_floats(rng, n);
  Buffer<float> a(*gpu, n), b(*gpu, n);
  a.upload(host);
  EXPECT_EQ(a.download(), host);
  gpu->copy_on_device(b.data(), a.data(), n * sizeof(float));
  auto want = host;
  // Zero an odd, unaligned sub-range of b.
  const size_t first = 7, count = 5001;
  gpu->fill_zero(b.data() + first, count * sizeof(float));
  for (size_t i = first; i < first + count; ++i) want[i] = 0.0f;
  EXPECT_EQ(b.download(), want);
  // Zero-byte operations are no-ops.
  gpu->copy_on_device(b.data(), a.data(), 0);
  gpu->fill_zero(b.data(), 0);
  gpu->synchronize();
  EXPECT_EQ(b.download(), want);
  EXPECT_EQ(gpu->kind(), DeviceKind::Cuda);
  EXPECT_NE(gpu->description().find("CUDA device 0"), std::string::npos) << gpu->description();
}

// ---- no GPU needed ------------------------------------------------------------------

TEST(CudaCheckMacros, ThrowWithFileLineCallAndLibraryText) {
  try {
    DDP_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "DDP_CUDA_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda_test_device.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << what;
  }
  try {
    DDP_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "DDP_CUBLAS_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda_test_device.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << what;
    EXPECT_NE(what.find(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)), std::string::npos) << what;
  }
  EXPECT_NO_THROW(DDP_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(DDP_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(DDP_CUDA_CHECK_NOTHROW(cudaErrorInvalidValue));  // prints to stderr only
}

TEST(CudaDeviceQuery, NeverThrowsAndExplainsNone) {
  std::string why = "unchanged";
  int count = -1;
  EXPECT_NO_THROW(count = visible_cuda_devices(&why));
  EXPECT_GE(count, 0);
  if (count == 0) {
    EXPECT_FALSE(why.empty());
    EXPECT_NE(why, "unchanged");
  }
  EXPECT_EQ(visible_cuda_devices(nullptr), count);
  // With a GPU, the query leaves no error for the next CUDA call to find.
  // (Without a driver every runtime call keeps failing with the same
  // initialisation error, so there is nothing to clear.)
  if (count > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

}  // namespace
}  // namespace ddp
