// cuda_test_elementwise.cpp: CudaBackend's element-wise kernels (bias add,
// activations forward and backward, bias-gradient column sums, casts with
// special values) against CpuBackend on the same inputs. Tolerances:
// cuda_test_support.h.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_support.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- element-wise -----------------------------------------------------------------

TEST_F(CudaKernels, AddBias) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{37, 1001}, {1, 1}, {1025, 3}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    auto y = both(test::random_halves(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f));
    auto bias = both(test::random_halves(rng, cols));
    cpu.add_bias_fp16(y.cpu.data(), bias.cpu.data(), rows, cols);
    gpu->add_bias_fp16(y.gpu.data(), bias.gpu.data(), rows, cols);
    // One FP32 add of two FP16 values, one rounding: the same bits.
    expect_halves_equal(y.gpu.download(), y.cpu.download(), "y " + std::to_string(rows) + "x" + std::to_string(cols));
  }
}

TEST_F(CudaKernels, ActivationsForwardBackward) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const auto z_host = test::random_halves(rng, n, -6.0f, 6.0f);
  const auto dy_host = test::random_halves(rng, n, -2.0f, 2.0f);
  auto z = both(z_host);
  auto dy = both(dy_host);
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    const std::string name = act == Activation::None ? "none" : act == Activation::Relu ? "relu" : "gelu";
    auto y = both(test::poison_halves(n));
    cpu.activation_forward_fp16(act, z.cpu.data(), y.cpu.data(), n);
    gpu->activation_forward_fp16(act, z.gpu.data(), y.gpu.data(), n);
    auto dz = both(test::poison_halves(n));
    cpu.activation_backward_fp16(act, z.cpu.data(), dy.cpu.data(), dz.cpu.data(), n);
    gpu->activation_backward_fp16(act, z.gpu.data(), dy.gpu.data(), dz.gpu.data(), n);
    if (act == Activation::Gelu) {
      // erff/expf last bits; 1e-6 absolute covers 0.5 z (1 + erf(z/sqrt2))
      // cancelling for z down to -6.
      expect_close(y.gpu.download(), y.cpu.download(), kFp16RelTol, 1e-6, name + " forward");
      expect_close(dz.gpu.download(), dz.cpu.download(), kFp16RelTol, 1e-6, name + " backward");
    } else {
      expect_halves_equal(y.gpu.download(), y.cpu.download(), name + " forward");
      expect_halves_equal(dz.gpu.download(), dz.cpu.download(), name + " backward");
    }
    // In place (z == y, dz == dy), as the layers call them.
    auto inplace = both(z_host);
    cpu.activation_forward_fp16(act, inplace.cpu.data(), inplace.cpu.data(), n);
    gpu->activation_forward_fp16(act, inplace.gpu.data(), inplace.gpu.data(), n);
    expect_close(inplace.gpu.download(), inplace.cpu.download(), kFp16RelTol, 1e-6, name + " forward in place");
    auto grad_inplace = both(dy_host);
    cpu.activation_backward_fp16(act, z.cpu.data(), grad_inplace.cpu.data(), grad_inplace.cpu.data(), n);
    gpu->activation_backward_fp16(act, z.gpu.data(), grad_inplace.gpu.data(), grad_inplace.gpu.data(), n);
    expect_close(grad_inplace.gpu.download(), grad_inplace.cpu.download(), kFp16RelTol, 1e-6,
                 name + " backward in place");
  }
}

TEST_F(CudaKernels, BiasGradColumnSums) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{1031, 17}, {3, 1000}, {1, 1}, {4099, 33}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    auto dy = both(test::random_halves(rng, static_cast<size_t>(rows) * cols));
    const auto prev = test::random_halves(rng, cols);
    for (bool accumulate : {false, true}) {
      auto db = both(accumulate ? prev : test::poison_halves(cols));
      cpu.bias_grad_fp16(dy.cpu.data(), rows, cols, db.cpu.data(), accumulate);
      gpu->bias_grad_fp16(dy.gpu.data(), rows, cols, db.gpu.data(), accumulate);
      // FP32 column sums of rows terms in [-1, 1] in two orders: the floor
      // of test_cpu_elementwise.cpp, 1e-5 * sum|terms| (<= rows).
      expect_close(db.gpu.download(), db.cpu.download(), kFp16RelTol, 1e-5 * rows + kFp16SubnormalStep,
                   "db " + std::to_string(rows) + "x" + std::to_string(cols) + (accumulate ? " accumulate" : ""));
    }
  }
}

TEST_F(CudaKernels, CastsIncludingSpecialValues) {
  SCOPED_TRACE(seed_text());
  auto f = test::random_floats(rng, 70001, -70000.0f, 70000.0f);
  const float inf = std::numeric_limits<float>::infinity();
  // Overflow, ties, subnormal and underflow edges, signed zero, Inf, NaN.
  for (float special : {0.0f, -0.0f, inf, -inf, std::nanf(""), 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                        std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.0f, -25) * 1.0001f,
                        std::ldexp(3.0f, -26), 1e-10f, 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11)})
    f.push_back(special);
  auto src = both(f);
  auto h = both(test::poison_halves(f.size()));
  cpu.cast_fp32_to_fp16(src.cpu.data(), h.cpu.data(), f.size());
  gpu->cast_fp32_to_fp16(src.gpu.data(), h.gpu.data(), f.size());
  expect_halves_equal(h.gpu.download(), h.cpu.download(), "fp32 -> fp16");

  // Every FP16 bit pattern widens exactly.
  std::vector<half16> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i].bits = static_cast<uint16_t>(i);
  auto halves = both(all);
  auto wide = both(nan_floats(all.size()));
  cpu.cast_fp16_to_fp32(halves.cpu.data(), wide.cpu.data(), all.size());
  gpu->cast_fp16_to_fp32(halves.gpu.data(), wide.gpu.data(), all.size());
  expect_floats_equal(wide.gpu.download(), wide.cpu.download(), "fp16 -> fp32");
}

}  // namespace
}  // namespace ddp
