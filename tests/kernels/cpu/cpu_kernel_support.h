// cpu_kernel_support.h: the fixtures of the CpuBackend suites
// (test_cpu_*.cpp), which check every kernel against a plain double-precision
// reference written in the test, on fresh random inputs.
//
// Tolerances (stated once): an FP16 output is the RNE rounding of an FP32
// computation, so it lies within 2^-11 relative of the FP32 value; the FP32
// value differs from the exact one by the FP32 summation error, bounded by
// ~k * 2^-24 * sum|terms|. We allow kFp16RelTol (2 FP16 ulps) relative plus
// 1e-5 * sum|terms| + 6e-8 (one FP16 subnormal step) absolute. FP32 outputs:
// kFp32RelTol relative plus the same summation floor.
//
// CpuBackend splits large GEMMs and element-wise passes over its threads
// (CpuKernelsThreaded). The element-wise results must be bitwise those of one
// thread and of the portable (non-F16C) loops: the split is by index and
// every element is computed by the same operations. GEMM slices are separate
// BLAS calls, so their sums may differ from one thread's in the last bit:
// those are held to the double reference (tolerances above) and to
// run-to-run equality.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/half_convert.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp::test {

class CpuKernels : public ::testing::Test {
 protected:
  CpuKernels() : rng(test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test_seed())); }
  CpuBackend cpu{1};
  std::mt19937_64 rng;
};

class CpuKernelsThreaded : public ::testing::Test {
 protected:
  CpuKernelsThreaded() : rng(test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test_seed())); }
  void TearDown() override { set_f16c_enabled(true); }
  CpuBackend one{1}, two{2};
  std::mt19937_64 rng;
  // Above the backend's threshold for splitting an element-wise pass.
  static constexpr size_t kLarge = 100003;
};

// The same fixtures for the precision-generic kernels, once per working
// precision (lowp_format.h): the backends are built for GetParam() and
// `fmt` reads, writes and holds their 16-bit buffers to it. Instantiated
// in each suite's file over kBothPrecisions.
class CpuLowpKernels : public ::testing::TestWithParam<Precision> {
 protected:
  CpuLowpKernels() : rng(test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test_seed())); }
  LowpFormat fmt{GetParam()};
  CpuBackend cpu{1, GetParam()};
  std::mt19937_64 rng;
};

class CpuLowpKernelsThreaded : public ::testing::TestWithParam<Precision> {
 protected:
  CpuLowpKernelsThreaded() : rng(test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test_seed())); }
  void TearDown() override { set_f16c_enabled(true); }
  LowpFormat fmt{GetParam()};
  CpuBackend one{1, GetParam()}, two{2, GetParam()};
  std::mt19937_64 rng;
  static constexpr size_t kLarge = 100003;
};

}  // namespace ddp::test
