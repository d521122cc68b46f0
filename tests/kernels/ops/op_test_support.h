// op_test_support.h: what the kernel suites of kernels/ops/ share. Each
// suite runs one family's CUDA kernels through their launchers (the code a
// GPU runs) against the CPU loops of the same operation (kernels/cpu/, the
// reference, itself checked against double precision in tests/kernels/),
// for FP16 and BF16. In CI the kernels run under the SIMT executor
// (kernels/simt/), which also fails a launch on a shared-memory race, an
// out-of-bounds access or a divergent barrier; the same suites are meant to
// run on a GPU, in ddp_cuda_tests.
//
// Inputs are fresh and random (DDP_TEST_SEED reproduces), outputs poisoned
// with NaN before each run. Tolerances are those of tests/cuda/
// cuda_test_support.h: under the executor both sides are compiled by g++,
// so the same FP32 operations in the same order are bitwise equal, and
// different summation orders (warp butterflies, per-chunk partials) agree
// to the FP32 summation-order tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_thread_pool.h"
#include "kernels/device_query.h"
#include "kernels/lowp16.h"
#include "support/device_array.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp::test {

// A suite over both precisions with a seeded generator and a CPU pool. The
// same suites build into ddp_cuda_tests, where a machine without a GPU
// skips them; under the SIMT executor they always run.
class OpTest : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
#if !defined(DDP_SIMT)
    std::string why;
    if (visible_cuda_devices(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
#endif
  }
  LowpFormat fmt{GetParam()};
  Precision precision() const { return GetParam(); }
  std::mt19937_64 rng{test_seed()};
  CpuThreadPool pool{2};
};

// The tolerance of an FP32 sum over `count` terms computed in two orders.
inline double fp32_order_rel_tol(size_t count) {
  return std::max(kFp32RelTol, 2.0 * static_cast<double>(count) * std::ldexp(1.0, -24));
}

// Element-wise |got - want| <= rel * |want| + abs_floor; NaN only where the
// reference is NaN (the formats' NaNs are compared as a class: the device's
// conversions give the canonical NaN, the host's keep sign and payload).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs_floor,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : !std::isnan(got[i]) &&
                              (got[i] == want[i] || std::fabs(static_cast<double>(got[i]) - want[i]) <=
                                                        rel * std::fabs(static_cast<double>(want[i])) + abs_floor);
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (rel " << rel << ", abs "
                    << abs_floor << ")";
      ++reported;
    }
  }
}

// The same, for 16-bit words read in the test's format.
inline void expect_close(const LowpFormat& fmt, const std::vector<lowp16>& got, const std::vector<lowp16>& want,
                         double rel, double abs_floor, const std::string& what) {
  expect_close(fmt.widened(got), fmt.widened(want), rel, abs_floor, what);
}

// |got - want| <= rel * |want| + floor[i]: an absolute floor per element.
inline void expect_close_each(const LowpFormat& fmt, const std::vector<lowp16>& got, const std::vector<lowp16>& want,
                              double rel, const std::vector<double>& floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(floor.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double g = fmt.widen(got[i]), w = fmt.widen(want[i]);
    const bool ok =
        std::isnan(w) ? std::isnan(g) : !std::isnan(g) && (g == w || std::fabs(g - w) <= rel * std::fabs(w) + floor[i]);
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << w << " (rel " << rel << ", abs " << floor[i]
                    << ")";
      ++reported;
    }
  }
}

// FP32 words bitwise (the sign of zero counts), NaNs as a class.
inline void expect_same_float_bits(const std::vector<float>& got, const std::vector<float>& want,
                                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i]) : bits_of(got[i]) == bits_of(want[i]);
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
      ++reported;
    }
  }
}

// Bitwise, NaNs as a class.
inline void expect_same_bits(const LowpFormat& fmt, const std::vector<lowp16>& got, const std::vector<lowp16>& want,
                             const std::string& what) {
  expect_close(fmt, got, want, 0.0, 0.0, what);
}

}  // namespace ddp::test
