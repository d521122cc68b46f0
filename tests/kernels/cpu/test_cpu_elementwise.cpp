// test_cpu_elementwise.cpp: the CPU element-wise loops (CpuBackend's ops, and the
// unfused passes the tests compare fused epilogues with: bias add,
// activations forward and backward, bias-gradient column sums, casts)
// against a double reference, and bitwise equal whatever the thread count
// and with the F16C loops on or off, in FP16 and in BF16. Tolerances:
// cpu_kernel_support.h, lowp_format.h.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/ops/elementwise.h"
#include "kernels/buffer.h"
#include "support/unfused_ops.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h: CpuKernels, inputs, tolerances

TEST_P(CpuLowpKernels, BiasAdd) {
  const int rows = 33, cols = 71;
  const auto y = fmt.random(rng, rows * cols), bias = fmt.random(rng, cols);
  Buffer<lowp16> dy(cpu, y.size()), db(cpu, cols);
  dy.upload(y);
  db.upload(bias);
  test::add_bias_lowp(dy.data(), db.data(), rows, cols, fmt.precision);
  const auto got = dy.download();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double want = static_cast<double>(fmt.widen(y[r * cols + c])) + fmt.widen(bias[c]);
      ASSERT_TRUE(close_enough(fmt.widen(got[r * cols + c]), want, fmt.rel_tol(), 6e-8));
    }
}

double gelu_ref(double z) { return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); }
double gelu_grad_ref(double z) {
  return 0.5 * (1 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
}

TEST_P(CpuLowpKernels, ActivationsForwardBackward) {
  const size_t n = 10007;
  const auto z = fmt.random(rng, n, -6.0f, 6.0f), dy = fmt.random(rng, n);
  Buffer<lowp16> dz_in(cpu, n), ddy(cpu, n), out(cpu, n);
  dz_in.upload(z);
  ddy.upload(dy);
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    out.upload(fmt.poison(n));
    test::activation_forward_lowp(act, dz_in.data(), out.data(), n, fmt.precision);
    auto y = out.download();
    for (size_t i = 0; i < n; ++i) {
      const double zi = fmt.widen(z[i]);
      const double want = act == Activation::Relu ? std::max(zi, 0.0) : gelu_ref(zi);
      ASSERT_TRUE(close_enough(fmt.widen(y[i]), want, fmt.rel_tol(), 1e-6)) << "z=" << zi;
    }
    out.upload(fmt.poison(n));
    test::activation_backward_lowp(act, dz_in.data(), ddy.data(), out.data(), n, fmt.precision);
    auto dz = out.download();
    for (size_t i = 0; i < n; ++i) {
      const double zi = fmt.widen(z[i]), g = fmt.widen(dy[i]);
      const double want = act == Activation::Relu ? (zi > 0 ? g : 0.0) : g * gelu_grad_ref(zi);
      ASSERT_TRUE(close_enough(fmt.widen(dz[i]), want, fmt.rel_tol(), 1e-6)) << "z=" << zi;
    }
  }
}

TEST_P(CpuLowpKernels, BiasGradColumnSums) {
  const int rows = 1031, cols = 19;
  const auto dy = fmt.random(rng, static_cast<size_t>(rows) * cols);
  const auto prev = fmt.random(rng, cols);
  Buffer<lowp16> ddy(cpu, dy.size()), db(cpu, cols);
  ddy.upload(dy);
  for (bool accumulate : {false, true}) {
    db.upload(accumulate ? prev : fmt.poison(cols));
    test::bias_grad_lowp(ddy.data(), rows, cols, db.data(), accumulate, fmt.precision);
    const auto got = db.download();
    for (int c = 0; c < cols; ++c) {
      double s = accumulate ? fmt.widen(prev[c]) : 0.0, mag = 0;
      for (int r = 0; r < rows; ++r) s += fmt.widen(dy[r * cols + c]), mag += std::fabs(fmt.widen(dy[r * cols + c]));
      ASSERT_TRUE(close_enough(fmt.widen(got[c]), s, fmt.rel_tol(), 1e-5 * mag + 6e-8)) << c;
    }
  }
}

TEST_P(CpuLowpKernels, Casts) {
  const size_t n = 4099;
  auto f = test::random_floats(rng, n, -70000.0f, 70000.0f);
  Buffer<float> df(cpu, n), back(cpu, n);
  Buffer<lowp16> dh(cpu, n);
  df.upload(f);
  dh.upload(fmt.poison(n));
  CastFp32ToLowp cast;
  cast.src = df.data();
  cast.dst = dh.data();
  cast.count = n;
  cast_fp32_to_lowp(cpu, cast);
  test::cast_lowp_to_fp32(dh.data(), back.data(), n, fmt.precision);
  const auto h = dh.download();
  const auto b = back.download();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(h[i].bits, fmt.narrow(f[i]).bits);
    ASSERT_EQ(b[i], fmt.widen(h[i]));
  }
  // The edges, on the 8-lane and the scalar paths: ties either way, the
  // largest finite and past it, Inf, NaN, subnormals, signed zeros.
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {0.0f,
                         -0.0f,
                         inf,
                         -inf,
                         std::numeric_limits<float>::quiet_NaN(),
                         65504.0f,
                         65520.0f,
                         -65520.0f,
                         1.0f + std::ldexp(1.0f, -11),
                         1.0f + 3 * std::ldexp(1.0f, -11),
                         1.0f + std::ldexp(1.0f, -8),
                         1.0f + 3 * std::ldexp(1.0f, -8),
                         3.389e38f,
                         -3.4e38f,
                         std::ldexp(1.0f, -24),
                         std::ldexp(1.0f, -25),
                         std::ldexp(1.0f, -133),
                         std::ldexp(1.0f, -134),
                         std::numeric_limits<float>::denorm_min(),
                         -std::ldexp(3.0f, -135)};
  std::vector<float> e(std::begin(edges), std::end(edges));
  while (e.size() < 24) e.push_back(e[e.size() % 20]);  // whole 8-lane blocks and a tail
  Buffer<float> de(cpu, e.size());
  Buffer<lowp16> dhe(cpu, e.size());
  de.upload(e);
  for (bool f16c : {true, false}) {
    set_f16c_enabled(f16c);
    dhe.upload(fmt.poison(e.size()));
    CastFp32ToLowp cast;
    cast.src = de.data();
    cast.dst = dhe.data();
    cast.count = e.size();
    cast_fp32_to_lowp(cpu, cast);
    const auto he = dhe.download();
    for (size_t i = 0; i < e.size(); ++i) {
      const uint16_t want = fmt.narrow(e[i]).bits;
      if (std::isnan(e[i]))
        EXPECT_TRUE(std::isnan(fmt.widen(he[i]))) << "NaN, f16c " << f16c;
      else
        EXPECT_EQ(he[i].bits, want) << e[i] << ", f16c " << f16c;
    }
  }
  set_f16c_enabled(true);
}

// ---- split over threads ------------------------------------------------------------

// Runs `kernel` on `backend` with the F16C loops on or off; returns its output.
template <class Kernel>
std::vector<lowp16> run_halves(CpuBackend& backend, bool f16c, size_t count, Kernel kernel) {
  set_f16c_enabled(f16c);
  Buffer<lowp16> out(backend, count);
  out.upload(LowpFormat::poison(count));
  kernel(backend, out.data());
  set_f16c_enabled(true);
  return out.download();
}

void expect_same_bits(const std::vector<lowp16>& got, const std::vector<lowp16>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].bits, want[i].bits) << what << " element " << i;
}

TEST_P(CpuLowpKernelsThreaded, ElementwiseBitwiseEqualAcrossThreadsAndPaths) {
  const size_t n = kLarge;
  auto z = fmt.random(rng, n, -6.0f, 6.0f);
  const auto dy = fmt.random(rng, n);
  // Special values on both sides of the split and in the tails.
  const std::vector<uint16_t> specials = fmt.special_bits();
  for (size_t i = 0; i < 8; ++i) z[i].bits = z[n / 2 + i].bits = z[n - 1 - i].bits = specials[i];
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    auto fwd = [&](CpuBackend& be, lowp16* out) {
      Buffer<lowp16> dz(be, n);
      dz.upload(z);
      test::activation_forward_lowp(act, dz.data(), out, n, fmt.precision);
    };
    auto bwd = [&](CpuBackend& be, lowp16* out) {
      Buffer<lowp16> dz(be, n);
      dz.upload(z);
      Buffer<lowp16> ddy(be, n);
      ddy.upload(dy);
      test::activation_backward_lowp(act, dz.data(), ddy.data(), out, n, fmt.precision);
    };
    const auto want_f = run_halves(one, false, n, fwd), want_b = run_halves(one, false, n, bwd);
    for (bool f16c : {false, true}) {
      expect_same_bits(run_halves(two, f16c, n, fwd), want_f, "activation forward");
      expect_same_bits(run_halves(two, f16c, n, bwd), want_b, "activation backward");
      expect_same_bits(run_halves(one, f16c, n, fwd), want_f, "activation forward, one thread");
    }
  }

  const int rows = 300, cols = 333;  // 3 strips of 32, one of 8, a scalar tail, split across threads
  const auto g = fmt.random(rng, static_cast<size_t>(rows) * cols), prev = fmt.random(rng, cols);
  for (bool accumulate : {false, true}) {
    auto bias_grad = [&](CpuBackend& be, lowp16* out) {
      Buffer<lowp16> dg(be, g.size());
      dg.upload(g);
      if (accumulate) be.copy_to_device(out, prev.data(), cols * sizeof(lowp16));
      test::bias_grad_lowp(dg.data(), rows, cols, out, accumulate, fmt.precision);
    };
    const auto want = run_halves(one, false, cols, bias_grad);
    for (bool f16c : {false, true}) expect_same_bits(run_halves(two, f16c, cols, bias_grad), want, "bias grad");
  }
  auto bias_add = [&](CpuBackend& be, lowp16* out) {
    be.copy_to_device(out, g.data(), g.size() * sizeof(lowp16));
    Buffer<lowp16> db(be, cols);
    db.upload(prev);
    test::add_bias_lowp(out, db.data(), rows, cols, fmt.precision);
  };
  const auto want_bias = run_halves(one, false, g.size(), bias_add);
  for (bool f16c : {false, true}) expect_same_bits(run_halves(two, f16c, g.size(), bias_add), want_bias, "bias add");

  const auto f = test::random_floats(rng, n, -70000.0f, 70000.0f);
  auto cast = [&](CpuBackend& be, lowp16* out) {
    Buffer<float> df(be, n);
    df.upload(f);
    CastFp32ToLowp op;
    op.src = df.data();
    op.dst = out;
    op.count = n;
    cast_fp32_to_lowp(be, op);
  };
  const auto want_cast = run_halves(one, false, n, cast);
  expect_same_bits(run_halves(two, true, n, cast), want_cast, "cast");
  Buffer<lowp16> dz(two, n);
  Buffer<float> back(two, n);
  dz.upload(z);
  test::cast_lowp_to_fp32(dz.data(), back.data(), n, fmt.precision);
  const auto b = back.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_to_bits(b[i]), float_to_bits(fmt.widen(z[i])));
}

}  // namespace
}  // namespace ddp
