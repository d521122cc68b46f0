// test_layernorm.cpp: the LayerNorm ops (kernels/ops/layernorm.h), FP16
// and BF16: the CPU row's forward against a double-precision LayerNorm, and
// the CUDA rows (the forward; the backward's dx, per-chunk parameter
// partials and their finish) against the CPU rows (op_test_support.h).
//
// Tolerances (tests/cuda/transformer_compare_support.h's rules): the row
// sums are lane-strided with a butterfly (CPU: sequential), dgamma/dbeta
// per-chunk partials added chunk by chunk (CPU: one sequential sum per
// column), and a GPU contracts into FMAs: one rounding apart,
// fmt.rel_tol(), plus the FP32 summation-order tolerance (at least 2e-5)
// times the magnitude of the terms that cancel
// (support/transformer_reference.h, per element), plus 2^-24. mean and
// rstd (FP32): fp32_order_rel_tol(cols), mean with that times the row's
// mean |x| as its floor.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"
#include "support/transformer_reference.h"

namespace ddp::test {
namespace {

class LayerNorm : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr double kSubnormalStep = 6e-8;  // 2^-24: FP16's subnormal step, a floor in both formats

std::vector<float> nan_floats(size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

// The FP32 summation-order tolerance of a sum over `count` terms, with
// room for a GPU's FMA contraction and sqrtf (the 2e-5 of tests/cuda).
double order_tol(size_t count) { return std::max(2e-5, fp32_order_rel_tol(count)); }

// expect_close with a floor per element.
void expect_close_each(const std::vector<float>& got, const std::vector<float>& want, double rel,
                       const std::function<double(size_t)>& abs_floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double floor = abs_floor(i);
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : !std::isnan(got[i]) && std::fabs(static_cast<double>(got[i]) - want[i]) <=
                                                     rel * std::fabs(static_cast<double>(want[i])) + floor;
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (rel " << rel << ", abs "
                    << floor << ")";
      ++reported;
    }
  }
}
void expect_close_each(const LowpFormat& fmt, const std::vector<lowp16>& got, const std::vector<lowp16>& want,
                       double rel, const std::function<double(size_t)>& abs_floor, const std::string& what) {
  expect_close_each(fmt.widened(got), fmt.widened(want), rel, abs_floor, what);
}
// Against a double reference.
void expect_close_each(const std::vector<float>& got, const std::vector<double>& want, double rel,
                       const std::function<double(size_t)>& abs_floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double floor = abs_floor(i);
    if (std::fabs(got[i] - want[i]) <= rel * std::fabs(want[i]) + floor) continue;  // NaN never passes
    ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (rel " << rel << ", abs "
                  << floor << ")";
    ++reported;
  }
}

// Rows of LayerNorm input with an offset and a spread of their own (as
// transformer_compare_support.h draws them).
std::vector<lowp16> layernorm_input(const LowpFormat& fmt, std::mt19937_64& rng, int rows, int cols) {
  std::vector<lowp16> x;
  std::uniform_real_distribution<float> offset(-3.0f, 3.0f), spread(0.1f, 4.0f);
  for (int r = 0; r < rows; ++r) {
    const float o = offset(rng), s = spread(rng);
    for (const lowp16 h : fmt.random(rng, static_cast<size_t>(cols))) x.push_back(fmt.narrow(o + s * fmt.widen(h)));
  }
  return x;
}

struct LayerNormShape {
  int rows, cols;
  std::string text() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

LayerNormForward forward_op(const lowp16* x, const lowp16* gamma, const lowp16* beta, int rows, int cols, lowp16* y,
                            float* mean, float* rstd) {
  LayerNormForward op;
  op.x = x;
  op.gamma = gamma;
  op.beta = beta;
  op.rows = rows;
  op.cols = cols;
  op.eps = kLayerNormEps;
  op.y = y;
  op.mean = mean;
  op.rstd = rstd;
  return op;
}

LayerNormBackward backward_op(const lowp16* dy, const lowp16* x, const lowp16* gamma, const float* mean,
                              const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx, lowp16* dgamma,
                              lowp16* dbeta, bool accumulate_params) {
  LayerNormBackward op;
  op.dy = dy;
  op.x = x;
  op.gamma = gamma;
  op.mean = mean;
  op.rstd = rstd;
  op.rows = rows;
  op.cols = cols;
  op.dx = dx;
  op.accumulate_dx = accumulate_dx;
  op.dgamma = dgamma;
  op.dbeta = dbeta;
  op.accumulate_params = accumulate_params;
  return op;
}

// Each row's mean |x|: the scale of the terms of its FP32 mean.
std::vector<double> row_mean_abs(const LowpFormat& fmt, const std::vector<lowp16>& x, int rows, int cols) {
  std::vector<double> mean_abs(static_cast<size_t>(rows), 0.0);
  for (size_t i = 0; i < x.size(); ++i) mean_abs[i / static_cast<size_t>(cols)] += std::fabs(fmt.widen(x[i])) / cols;
  return mean_abs;
}

// The CPU row (sequential FP32 sums) against nn.LayerNorm in double on the
// same 16-bit inputs (u = 2^-24, n = cols, order = fp32_order_rel_tol(n)
// = max(1e-5, 2 n u)):
// - mean: a sequential sum of n terms is within (n - 1) u sum|x| of the
//   exact one, the division adds u |mean|: within n u mean|x| <= order *
//   mean|x|.
// - rstd: the variance sums n positive terms (x - mean)^2, each rounded
//   twice: within (n + 3) u relative, halved by the square root, plus the
//   roundings of the sqrt and the division: within order relative. The
//   mean's error d adds d^2 / var to the variance exactly (the cross term
//   sums to 0), so rstd moves by rstd (d rstd)^2 / 2 more: the floor.
// - y: xhat = (x - mean) rstd is off by d rstd (the mean's error) plus
//   |xhat| (order + 2u) (rstd's error and two roundings), times gamma, plus
//   the roundings of * gamma and + beta: within order (|gamma| (mean|x| rstd
//   + 2 |xhat|) + |beta|); then one rounding to the format, fmt.rel_tol(),
//   and 2^-24 for FP16's subnormals.
TEST_P(LayerNorm, ForwardCpuRowMatchesDouble) {
  SCOPED_TRACE(seed_text());
  for (const LayerNormShape s : {LayerNormShape{1, 1}, LayerNormShape{1, 31}, LayerNormShape{9, 33},
                                 LayerNormShape{3, 257}, LayerNormShape{29, 96}}) {
    SCOPED_TRACE("layernorm " + s.text());
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols);
    const std::vector<lowp16> x = layernorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
    std::vector<lowp16> y = LowpFormat::poison(n);
    std::vector<float> mean = nan_floats(static_cast<size_t>(s.rows)), rstd = nan_floats(static_cast<size_t>(s.rows));
    layernorm_forward_lowp(
        cpu, forward_op(x.data(), gamma.data(), beta.data(), s.rows, s.cols, y.data(), mean.data(), rstd.data()));
    const LayerNormReference exact = layernorm_reference(fmt.widened_doubles(x), fmt.widened_doubles(gamma),
                                                         fmt.widened_doubles(beta), s.rows, s.cols, kLayerNormEps);
    const std::vector<double> mean_abs = row_mean_abs(fmt, x, s.rows, s.cols);
    const double order = fp32_order_rel_tol(cols);
    expect_close_each(
        mean, exact.mean, 0.0, [&](size_t r) { return order * mean_abs[r]; }, "mean");
    expect_close_each(
        rstd, exact.rstd, order,
        [&](size_t r) {
          const double d_rstd = order * mean_abs[r] * exact.rstd[r];
          return exact.rstd[r] * d_rstd * d_rstd / 2;
        },
        "rstd");
    std::vector<double> y_floor(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t r = i / cols, c = i % cols;
      const double xhat = (fmt.widen(x[i]) - exact.mean[r]) * exact.rstd[r];
      y_floor[i] = order * (std::fabs(fmt.widen(gamma[c])) * (mean_abs[r] * exact.rstd[r] + 2 * std::fabs(xhat)) +
                            std::fabs(fmt.widen(beta[c]))) +
                   kSubnormalStep;
    }
    expect_close_each(
        fmt.widened(y), exact.y, fmt.rel_tol(), [&](size_t i) { return y_floor[i]; }, "y");
  }
}

// One row, one column (variance 0), odd widths below and past a warp's 32
// lanes and past 256, rows past one block's 8 warps.
TEST_P(LayerNorm, ForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const LayerNormShape s : {LayerNormShape{1, 1}, LayerNormShape{1, 31}, LayerNormShape{9, 33},
                                 LayerNormShape{3, 257}, LayerNormShape{17, 64}}) {
    SCOPED_TRACE("layernorm " + s.text());
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols);
    const std::vector<lowp16> x = layernorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
    std::vector<lowp16> want_y(n);
    std::vector<float> want_mean(static_cast<size_t>(s.rows)), want_rstd(static_cast<size_t>(s.rows));
    layernorm_forward_lowp(cpu, forward_op(x.data(), gamma.data(), beta.data(), s.rows, s.cols, want_y.data(),
                                           want_mean.data(), want_rstd.data()));
    DeviceArray<lowp16> d_x(x), d_gamma(gamma), d_beta(beta), d_y(LowpFormat::poison(n));
    DeviceArray<float> d_mean(nan_floats(static_cast<size_t>(s.rows))), d_rstd(nan_floats(static_cast<size_t>(s.rows)));
    layernorm_forward_lowp_cuda(cuda, forward_op(d_x.get(), d_gamma.get(), d_beta.get(), s.rows, s.cols, d_y.get(),
                                                 d_mean.get(), d_rstd.get()));
    const LayerNormReference exact = layernorm_reference(fmt.widened_doubles(x), fmt.widened_doubles(gamma),
                                                         fmt.widened_doubles(beta), s.rows, s.cols, kLayerNormEps);
    const std::vector<double> mean_abs = row_mean_abs(fmt, x, s.rows, s.cols);
    const double stat_tol = fp32_order_rel_tol(cols);
    expect_close_each(
        d_mean.download(), want_mean, stat_tol, [&](size_t r) { return stat_tol * mean_abs[r]; }, "mean");
    expect_close(d_rstd.download(), want_rstd, stat_tol, 0.0, "rstd");
    expect_close_each(
        fmt, d_y.download(), want_y, fmt.rel_tol(),
        [&](size_t i) {
          const double b = fmt.widen(beta[i % cols]);
          return order_tol(cols) * (std::fabs(exact.y[i] - b) + std::fabs(b)) + kSubnormalStep;
        },
        "y");
  }
}

// The backward from the CPU's statistics: dx (one warp per row), dgamma and
// dbeta (partials of 64 rows: one chunk, a partial one, three; 128-thread
// blocks of columns: one and three; the finish past 256 columns), every
// combination of the two accumulate flags, and no rows at all (dgamma and
// dbeta still written: 0, or their old values).
TEST_P(LayerNorm, BackwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const LayerNormShape s : {LayerNormShape{1, 1}, LayerNormShape{9, 33}, LayerNormShape{130, 257},
                                 LayerNormShape{64, 5}, LayerNormShape{0, 7}}) {
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols),
                 rows = static_cast<size_t>(s.rows);
    const std::vector<lowp16> x = layernorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
    const std::vector<lowp16> dy = fmt.random(rng, n), prev_dx = fmt.random(rng, n);
    const std::vector<lowp16> prev_dgamma = fmt.random(rng, cols), prev_dbeta = fmt.random(rng, cols);
    std::vector<lowp16> y(n);
    std::vector<float> mean(rows), rstd(rows);
    layernorm_forward_lowp(
        cpu, forward_op(x.data(), gamma.data(), beta.data(), s.rows, s.cols, y.data(), mean.data(), rstd.data()));
    const LayerNormGradReference exact = layernorm_grad_reference(
        fmt.widened_doubles(dy), fmt.widened_doubles(x), fmt.widened_doubles(gamma), s.rows, s.cols, kLayerNormEps);
    DeviceArray<lowp16> d_dy(dy), d_x(x), d_gamma(gamma);
    DeviceArray<float> d_mean(mean), d_rstd(rstd);
    for (const bool acc_dx : {false, true})
      for (const bool acc_params : {false, true}) {
        SCOPED_TRACE("layernorm backward " + s.text() + (acc_dx ? " accumulate dx" : "") +
                     (acc_params ? " accumulate params" : ""));
        std::vector<lowp16> want_dx = acc_dx ? prev_dx : LowpFormat::poison(n);
        std::vector<lowp16> want_dgamma = acc_params ? prev_dgamma : LowpFormat::poison(cols);
        std::vector<lowp16> want_dbeta = acc_params ? prev_dbeta : LowpFormat::poison(cols);
        DeviceArray<lowp16> d_dx(want_dx), d_dgamma(want_dgamma), d_dbeta(want_dbeta);
        layernorm_backward_lowp(cpu,
                                backward_op(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), s.rows, s.cols,
                                            want_dx.data(), acc_dx, want_dgamma.data(), want_dbeta.data(), acc_params));
        layernorm_backward_lowp_cuda(
            cuda, backward_op(d_dy.get(), d_x.get(), d_gamma.get(), d_mean.get(), d_rstd.get(), s.rows, s.cols,
                              d_dx.get(), acc_dx, d_dgamma.get(), d_dbeta.get(), acc_params));
        expect_close_each(
            fmt, d_dx.download(), want_dx, fmt.rel_tol(),
            [&](size_t i) { return order_tol(cols) * exact.dx_magnitude[i] + kSubnormalStep; }, "dx");
        const auto prev_abs = [&](const std::vector<lowp16>& prev, size_t c) {
          return acc_params ? std::fabs(static_cast<double>(fmt.widen(prev[c]))) : 0.0;
        };
        expect_close_each(
            fmt, d_dgamma.download(), want_dgamma, fmt.rel_tol(),
            [&](size_t c) {
              return order_tol(rows) * (exact.dgamma_magnitude[c] + prev_abs(prev_dgamma, c)) + kSubnormalStep;
            },
            "dgamma");
        expect_close_each(
            fmt, d_dbeta.download(), want_dbeta, fmt.rel_tol(),
            [&](size_t c) {
              return order_tol(rows) * (exact.dbeta_magnitude[c] + prev_abs(prev_dbeta, c)) + kSubnormalStep;
            },
            "dbeta");
      }
  }
}

// dx == dy (the gradient in place, as the header allows): the same bits as
// into a separate dx, and the parameter sums still read the original dy.
TEST_P(LayerNorm, BackwardInPlaceIsTheSameAsOutOfPlace) {
  SCOPED_TRACE(seed_text());
  const int rows = 70, cols = 45;
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<lowp16> x = layernorm_input(fmt, rng, rows, cols);
  const std::vector<lowp16> gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
  const std::vector<lowp16> dy = fmt.random(rng, n);
  std::vector<lowp16> y(n);
  std::vector<float> mean(rows), rstd(rows);
  layernorm_forward_lowp(
      cpu, forward_op(x.data(), gamma.data(), beta.data(), rows, cols, y.data(), mean.data(), rstd.data()));
  DeviceArray<lowp16> d_x(x), d_gamma(gamma), d_dy(dy), d_in_place(dy);
  DeviceArray<float> d_mean(mean), d_rstd(rstd);
  DeviceArray<lowp16> d_dx(LowpFormat::poison(n)), dgamma(LowpFormat::poison(cols)), dbeta(LowpFormat::poison(cols));
  DeviceArray<lowp16> dgamma2(LowpFormat::poison(cols)), dbeta2(LowpFormat::poison(cols));
  layernorm_backward_lowp_cuda(cuda, backward_op(d_dy.get(), d_x.get(), d_gamma.get(), d_mean.get(), d_rstd.get(), rows,
                                                 cols, d_dx.get(), false, dgamma.get(), dbeta.get(), false));
  layernorm_backward_lowp_cuda(
      cuda, backward_op(d_in_place.get(), d_x.get(), d_gamma.get(), d_mean.get(), d_rstd.get(), rows, cols,
                        d_in_place.get(), false, dgamma2.get(), dbeta2.get(), false));
  expect_same_bits(fmt, d_in_place.download(), d_dx.download(), "dx in place");
  expect_same_bits(fmt, dgamma2.download(), dgamma.download(), "dgamma with dx in place");
  expect_same_bits(fmt, dbeta2.download(), dbeta.download(), "dbeta with dx in place");
}

TEST_P(LayerNorm, RefusesNoColumns) {
  DeviceArray<lowp16> d(1);
  DeviceArray<float> f(1);
  EXPECT_THROW(
      layernorm_forward_lowp_cuda(cuda, forward_op(d.get(), d.get(), d.get(), 1, 0, d.get(), f.get(), f.get())), Error);
  std::vector<lowp16> h(1);
  std::vector<float> hf(1);
  EXPECT_THROW(
      layernorm_forward_lowp(cpu, forward_op(h.data(), h.data(), h.data(), 1, 0, h.data(), hf.data(), hf.data())),
      Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, LayerNorm, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
