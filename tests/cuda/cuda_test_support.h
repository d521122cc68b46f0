// cuda_test_support.h: what the cuda_test_*.cpp suites of CudaBackend
// against CpuBackend (the reference, itself checked in test_cpu_*.cpp) share:
// the CudaKernels fixture, which skips with the reason where no GPU is
// visible and holds both backends and a seeded generator, and the
// comparisons with the tolerances below. Inputs are fresh and random,
// outputs poisoned before each run.
//
// Tolerances, stated once (both sides compute in FP32, so we compare the two
// implementations with each other, not with an exact value), in FP16's
// terms; the precision-generic suites (CudaLowpKernels, below) hold BF16 to
// the same rules with its ulp, fmt.rel_tol(), and keep 2^-24 as the floor:
// - Same FP32 operations in the same order (add_bias, ReLU, casts, unscale):
//   bitwise equal.
// - GEMM: both sum exact products in FP32, but in different orders (Tensor
//   Core MMA steps, truncating adds, vs OpenBLAS's blocking), so the FP32
//   sums differ by up to ~k * 2^-24 * sum|terms| and the FP16 outputs by 1-2
//   FP16 ulps: kFp16RelTol relative plus 1e-5 * sum|terms| + 6e-8 (one FP16
//   subnormal step) absolute, as test_cpu_gemm.cpp allows against double.
// - Transcendental kernels (GELU, softmax): CUDA's erff/expf/logf and
//   glibc's differ in the last FP32 bits; after rounding to FP16 that is at
//   most one FP16 ulp (kFp16RelTol) plus a small absolute floor where the
//   result cancels (1 + erf(z) for z << 0, p - 1 near a certain class).
// - FP32 loss reductions: CpuBackend sums sequentially in FP32 (relative
//   error up to count * 2^-24 for positive terms), CUDA in a tree (double
//   across rows), so we allow max(kFp32RelTol, 2 * count * 2^-24) relative.
//   Bias grad (FP32 column sums, FP16 result) gets the GEMM rule with
//   sum|terms| <= rows. L2 norm: both accumulate in double, kFp32RelTol.
// - SGD: nvcc contracts a*b+c into FMA, g++ (ISO C++, no -mfma) does not, so
//   FP32 masters and momenta differ by ~1 FP32 ulp of the terms: kFp32RelTol
//   plus 1e-6 absolute; the FP16 re-cast may then flip by one FP16 ulp.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/gemm_lowp.h"
#include "support/gpu_test.h"
#include "support/lowp_format.h"
#include "support/test_support.h"

namespace ddp::test {

inline constexpr double kFp16SubnormalStep = 6e-8;  // 2^-24

// Tolerance of an FP32 sum over `count` terms computed by two different
// orders (see the header comment).
inline double fp32_sum_rel_tol(size_t count) {
  return std::max(kFp32RelTol, 2.0 * static_cast<double>(count) * std::ldexp(1.0, -24));
}

// The same host data on both backends.
template <class T>
struct BackendPair {
  Buffer<T> cpu, gpu;
};
template <class T>
BackendPair<T> upload_to_both(CpuBackend& cpu, CudaBackend& gpu, const std::vector<T>& host) {
  BackendPair<T> p{Buffer<T>(cpu, host.size()), Buffer<T>(gpu, host.size())};
  p.cpu.upload(host);
  p.gpu.upload(host);
  return p;
}

class CudaKernels : public GpuTest {
 protected:
  CudaKernels() : rng(test::test_seed()) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0);
  }

  template <class T>
  using Pair = BackendPair<T>;
  template <class T>
  Pair<T> both(const std::vector<T>& host) {
    return upload_to_both(cpu, *gpu, host);
  }

  LowpFormat fmt;  // FP16, both backends' default
  CpuBackend cpu;  // default: leaves the BLAS thread count alone
  std::unique_ptr<CudaBackend> gpu;
  std::mt19937_64 rng;
};

// The fixture of the precision-generic suites: both backends built for
// GetParam(), `fmt` reading, writing and holding their 16-bit buffers to
// it. Instantiated once (cuda_test_lowp_suites.cpp) for FP16 and BF16: every
// TEST_P runs as Precisions/CudaLowpKernels.<test>/fp16 and .../bf16. The
// tolerances above hold with fmt.rel_tol() (two ulps of the format) in
// place of kFp16RelTol.
class CudaLowpKernels : public GpuTest, public ::testing::WithParamInterface<Precision> {
 protected:
  template <class T>
  using Pair = BackendPair<T>;
  CudaLowpKernels() : rng(test::test_seed()) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0, GetParam());
  }

  template <class T>
  Pair<T> both(const std::vector<T>& host) {
    return upload_to_both(cpu, *gpu, host);
  }

  LowpFormat fmt{GetParam()};
  CpuBackend cpu{0, GetParam()};
  std::unique_ptr<CudaBackend> gpu;
  std::mt19937_64 rng;
};

inline bool same_half(const LowpFormat& fmt, lowp16 a, lowp16 b) {
  const bool a_nan = std::isnan(fmt.widen(a)), b_nan = std::isnan(fmt.widen(b));
  // NaN payloads differ (the CUDA intrinsic returns a canonical NaN).
  return (a_nan || b_nan) ? (a_nan && b_nan) : a.bits == b.bits;
}

inline bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

inline bool same_half(lowp16 a, lowp16 b) { return same_half(LowpFormat{}, a, b); }

// Reports the first few mismatches and the total.
inline void expect_halves_equal(const LowpFormat& fmt, const std::vector<lowp16>& got, const std::vector<lowp16>& want,
                                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_half(fmt, got[i], want[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda 0x" << std::hex << got[i].bits << " cpu 0x" << want[i].bits
                    << std::dec;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ";
}

inline void expect_halves_equal(const std::vector<lowp16>& got, const std::vector<lowp16>& want,
                                const std::string& what) {
  expect_halves_equal(LowpFormat{}, got, want, what);
}

inline void expect_floats_equal(const std::vector<float>& got, const std::vector<float>& want,
                                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_float(got[i], want[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda " << got[i] << " cpu " << want[i];
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ";
}

// abs_floor(i) gives the absolute floor for element i; fmt widens lowp16
// elements.
template <class T, class Floor>
void expect_close(const LowpFormat& fmt, const std::vector<T>& got, const std::vector<T>& want, double rel,
                  Floor abs_floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g, w;
    if constexpr (std::is_same_v<T, lowp16>) {
      g = fmt.widen(got[i]);
      w = fmt.widen(want[i]);
    } else {
      g = got[i];
      w = want[i];
    }
    if (!close_enough(g, w, rel, abs_floor(i)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda " << g << " cpu " << w << " (diff " << g - w << ")";
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " outside tolerance";
}

template <class T>
void expect_close(const LowpFormat& fmt, const std::vector<T>& got, const std::vector<T>& want, double rel,
                  double abs_floor, const std::string& what) {
  expect_close(
      fmt, got, want, rel, [abs_floor](size_t) { return abs_floor; }, what);
}

// In FP16, for the fixtures that are not precision-generic.
template <class T, class Floor>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double rel, Floor abs_floor,
                  const std::string& what) {
  expect_close(LowpFormat{}, got, want, rel, abs_floor, what);
}

inline std::vector<float> nan_floats(size_t count) { return std::vector<float>(count, std::nanf("")); }

// Both transposes, for loops over every combination.
inline const Transpose kBoth[] = {Transpose::No, Transpose::Yes};

}  // namespace ddp::test
