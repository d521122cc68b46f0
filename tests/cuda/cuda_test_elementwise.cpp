// cuda_test_elementwise.cpp: the CUDA element-wise kernels (the column sums
// of a GEMM's bias gradient, against the unfused CPU pass; the FP32 -> 16-bit
// cast with special values, against CpuBackend) on the same inputs.
// Tolerances: cuda_test_support.h.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/ops/elementwise.h"
#include "kernels/cuda/cuda_elementwise.h"
#include "support/unfused_ops.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- element-wise -----------------------------------------------------------------

TEST_P(CudaLowpKernels, BiasGradColumnSums) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{1031, 17}, {3, 1000}, {1, 1}, {4099, 33}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    auto dy = both(fmt.random(rng, static_cast<size_t>(rows) * cols));
    const auto prev = fmt.random(rng, cols);
    for (bool accumulate : {false, true}) {
      auto db = both(accumulate ? prev : test::poison_halves(cols));
      test::bias_grad_lowp(dy.cpu.data(), rows, cols, db.cpu.data(), accumulate, GetParam());
      launch_column_sums_lowp(gpu->compute_stream(), GetParam(), dy.gpu.data(), rows, cols, static_cast<size_t>(cols),
                              1, db.gpu.data(), accumulate);
      // FP32 column sums of rows terms in [-1, 1] in two orders: the floor
      // of test_cpu_elementwise.cpp, 1e-5 * sum|terms| (<= rows).
      expect_close(fmt, db.gpu.download(), db.cpu.download(), fmt.rel_tol(), 1e-5 * rows + kFp16SubnormalStep,
                   "db " + std::to_string(rows) + "x" + std::to_string(cols) + (accumulate ? " accumulate" : ""));
    }
  }
}

TEST_P(CudaLowpKernels, CastsIncludingSpecialValues) {
  SCOPED_TRACE(seed_text());
  auto f = test::random_floats(rng, 70001, -70000.0f, 70000.0f);
  const float inf = std::numeric_limits<float>::infinity();
  // Overflow, ties, subnormal and underflow edges, signed zero, Inf, NaN:
  // FP16's, and BF16's (its largest finite value and the tie above it,
  // FP32's subnormals, ties at 2^-8 past 1, a value whose rounding carries
  // into the exponent). Both formats get both lists.
  for (float special : {0.0f,
                        -0.0f,
                        inf,
                        -inf,
                        std::nanf(""),
                        65504.0f,
                        65519.99f,
                        65520.0f,
                        -65520.0f,
                        std::ldexp(1.0f, -24),
                        std::ldexp(1.0f, -25),
                        std::ldexp(1.0f, -25) * 1.0001f,
                        std::ldexp(3.0f, -26),
                        1e-10f,
                        1.0f + std::ldexp(1.0f, -11),
                        1.0f + std::ldexp(3.0f, -11),
                        kBfloat16Max,
                        std::ldexp(511.0f, 119),
                        -std::ldexp(511.0f, 119),
                        std::numeric_limits<float>::max(),
                        std::ldexp(1.0f, -133),
                        std::ldexp(1.0f, -149),
                        std::ldexp(3.0f, -134),
                        1.0f + std::ldexp(1.0f, -8),
                        1.0f + std::ldexp(3.0f, -8),
                        1.9999999f})
    f.push_back(special);
  auto src = both(f);
  auto h = both(test::poison_halves(f.size()));
  CastFp32ToLowp cast;
  cast.count = f.size();
  cast.src = src.cpu.data();
  cast.dst = h.cpu.data();
  cast_fp32_to_lowp(cpu, cast);
  cast.src = src.gpu.data();
  cast.dst = h.gpu.data();
  cast_fp32_to_lowp(*gpu, cast);
  expect_halves_equal(fmt, h.gpu.download(), h.cpu.download(), std::string("fp32 -> ") + precision_name(GetParam()));
}

}  // namespace
}  // namespace ddp
