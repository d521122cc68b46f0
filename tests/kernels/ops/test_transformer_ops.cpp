// test_transformer_ops.cpp: cuda_transformer.cu's kernels (LayerNorm
// forward; its backward's dx, per-chunk parameter partials and their finish;
// the residual add; the head permutes rows_to_heads and heads_to_rows)
// against the CPU loops (kernels/cpu/cpu_transformer.h), FP16 and BF16
// (op_test_support.h).
//
// Tolerances (tests/cuda/transformer_compare_support.h's rules):
// - the residual add and the permutes: one FP32 add of two 16-bit values,
//   or a copy: bitwise.
// - LayerNorm: the row sums are lane-strided with a butterfly (CPU:
//   sequential), dgamma/dbeta per-chunk partials added chunk by chunk (CPU:
//   one sequential sum per column), and a GPU contracts into FMAs: one
//   rounding apart, fmt.rel_tol(), plus the FP32 summation-order tolerance
//   (at least 2e-5) times the magnitude of the terms that cancel
//   (support/transformer_reference.h, per element), plus 2^-24. mean and
//   rstd (FP32): fp32_order_rel_tol(cols), mean with that times the row's
//   mean |x| as its floor.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cuda/cuda_transformer.h"
#include "kernels/error.h"
#include "kernels/ops/op_test_support.h"
#include "support/transformer_reference.h"

namespace ddp::test {
namespace {

using TransformerOps = OpTest;

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

// One row, one column (variance 0), odd widths below and past a warp's 32
// lanes and past 256, rows past one block's 8 warps.
TEST_P(TransformerOps, LayerNormForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const LayerNormShape s : {LayerNormShape{1, 1}, LayerNormShape{1, 31}, LayerNormShape{9, 33},
                                 LayerNormShape{3, 257}, LayerNormShape{17, 64}}) {
    SCOPED_TRACE("layernorm " + s.text());
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols);
    const std::vector<lowp16> x = layernorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
    std::vector<lowp16> want_y(n);
    std::vector<float> want_mean(static_cast<size_t>(s.rows)), want_rstd(static_cast<size_t>(s.rows));
    cpu::layernorm_forward(precision(), pool, x.data(), gamma.data(), beta.data(), s.rows, s.cols, kLayerNormEps,
                           want_y.data(), want_mean.data(), want_rstd.data());
    DeviceArray<lowp16> d_x(x), d_gamma(gamma), d_beta(beta), d_y(LowpFormat::poison(n));
    DeviceArray<float> d_mean(nan_floats(static_cast<size_t>(s.rows))), d_rstd(nan_floats(static_cast<size_t>(s.rows)));
    launch_layernorm_forward_lowp(nullptr, precision(), d_x.get(), d_gamma.get(), d_beta.get(), s.rows, s.cols,
                                  kLayerNormEps, d_y.get(), d_mean.get(), d_rstd.get());
    const LayerNormReference exact = layernorm_reference(fmt.widened_doubles(x), fmt.widened_doubles(gamma),
                                                         fmt.widened_doubles(beta), s.rows, s.cols, kLayerNormEps);
    std::vector<double> mean_abs(static_cast<size_t>(s.rows), 0.0);
    for (size_t i = 0; i < n; ++i) mean_abs[i / cols] += std::fabs(fmt.widen(x[i])) / s.cols;
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
TEST_P(TransformerOps, LayerNormBackwardMatchesTheCpu) {
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
    cpu::layernorm_forward(precision(), pool, x.data(), gamma.data(), beta.data(), s.rows, s.cols, kLayerNormEps,
                           y.data(), mean.data(), rstd.data());
    const LayerNormGradReference exact = layernorm_grad_reference(
        fmt.widened_doubles(dy), fmt.widened_doubles(x), fmt.widened_doubles(gamma), s.rows, s.cols, kLayerNormEps);
    DeviceArray<lowp16> d_dy(dy), d_x(x), d_gamma(gamma);
    DeviceArray<float> d_mean(mean), d_rstd(rstd);
    DeviceArray<char> scratch(layernorm_backward_scratch_bytes(s.rows, s.cols));
    for (const bool acc_dx : {false, true})
      for (const bool acc_params : {false, true}) {
        SCOPED_TRACE("layernorm backward " + s.text() + (acc_dx ? " accumulate dx" : "") +
                     (acc_params ? " accumulate params" : ""));
        std::vector<lowp16> want_dx = acc_dx ? prev_dx : LowpFormat::poison(n);
        std::vector<lowp16> want_dgamma = acc_params ? prev_dgamma : LowpFormat::poison(cols);
        std::vector<lowp16> want_dbeta = acc_params ? prev_dbeta : LowpFormat::poison(cols);
        DeviceArray<lowp16> d_dx(want_dx), d_dgamma(want_dgamma), d_dbeta(want_dbeta);
        cpu::layernorm_backward(precision(), pool, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), s.rows,
                                s.cols, want_dx.data(), acc_dx, want_dgamma.data(), want_dbeta.data(), acc_params);
        launch_layernorm_backward_lowp(nullptr, precision(), d_dy.get(), d_x.get(), d_gamma.get(), d_mean.get(),
                                       d_rstd.get(), s.rows, s.cols, d_dx.get(), acc_dx, d_dgamma.get(), d_dbeta.get(),
                                       acc_params, scratch.get());
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
TEST_P(TransformerOps, LayerNormBackwardInPlaceIsTheSameAsOutOfPlace) {
  SCOPED_TRACE(seed_text());
  const int rows = 70, cols = 45;
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<lowp16> x = layernorm_input(fmt, rng, rows, cols);
  const std::vector<lowp16> gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
  const std::vector<lowp16> dy = fmt.random(rng, n);
  std::vector<lowp16> y(n);
  std::vector<float> mean(rows), rstd(rows);
  cpu::layernorm_forward(precision(), pool, x.data(), gamma.data(), beta.data(), rows, cols, kLayerNormEps, y.data(),
                         mean.data(), rstd.data());
  DeviceArray<lowp16> d_x(x), d_gamma(gamma), d_dy(dy), d_in_place(dy);
  DeviceArray<float> d_mean(mean), d_rstd(rstd);
  DeviceArray<char> scratch(layernorm_backward_scratch_bytes(rows, cols));
  DeviceArray<lowp16> d_dx(LowpFormat::poison(n)), dgamma(LowpFormat::poison(cols)), dbeta(LowpFormat::poison(cols));
  DeviceArray<lowp16> dgamma2(LowpFormat::poison(cols)), dbeta2(LowpFormat::poison(cols));
  launch_layernorm_backward_lowp(nullptr, precision(), d_dy.get(), d_x.get(), d_gamma.get(), d_mean.get(), d_rstd.get(),
                                 rows, cols, d_dx.get(), false, dgamma.get(), dbeta.get(), false, scratch.get());
  launch_layernorm_backward_lowp(nullptr, precision(), d_in_place.get(), d_x.get(), d_gamma.get(), d_mean.get(),
                                 d_rstd.get(), rows, cols, d_in_place.get(), false, dgamma2.get(), dbeta2.get(), false,
                                 scratch.get());
  expect_same_bits(fmt, d_in_place.download(), d_dx.download(), "dx in place");
  expect_same_bits(fmt, dgamma2.download(), dgamma.download(), "dgamma with dx in place");
  expect_same_bits(fmt, dbeta2.download(), dbeta.download(), "dbeta with dx in place");
}

TEST_P(TransformerOps, LayerNormRefusesNoColumns) {
  DeviceArray<lowp16> d(1);
  DeviceArray<float> f(1);
  EXPECT_THROW(launch_layernorm_forward_lowp(nullptr, precision(), d.get(), d.get(), d.get(), 1, 0, kLayerNormEps,
                                             d.get(), f.get(), f.get()),
               Error);
}

TEST_P(TransformerOps, AddIsTheCpusBits) {
  SCOPED_TRACE(seed_text());
  for (const size_t count : {size_t{1}, size_t{255}, size_t{257}, size_t{3001}}) {
    SCOPED_TRACE("add, count " + std::to_string(count));
    // Past FP16's range (Inf) and sums that cancel.
    const std::vector<lowp16> a = fmt.random(rng, count, -40000.0f, 40000.0f),
                              b = fmt.random(rng, count, -40000.0f, 40000.0f);
    std::vector<lowp16> want(count);
    cpu::add(precision(), pool, a.data(), b.data(), want.data(), count);
    DeviceArray<lowp16> d_a(a), d_b(b), d_y(LowpFormat::poison(count));
    launch_add_lowp(nullptr, precision(), d_a.get(), d_b.get(), d_y.get(), count);
    expect_same_bits(fmt, d_y.download(), want, "y = a + b");
    launch_add_lowp(nullptr, precision(), d_a.get(), d_b.get(), d_a.get(), count);  // y == a
    expect_same_bits(fmt, d_a.download(), want, "a += b");
    d_a.upload(a);
    launch_add_lowp(nullptr, precision(), d_a.get(), d_b.get(), d_b.get(), count);  // y == b
    expect_same_bits(fmt, d_b.download(), want, "b += a");
  }
}

struct PermuteShape {
  int batch, seq_len, heads, head_size;
  std::string text() const {
    return "B=" + std::to_string(batch) + " T=" + std::to_string(seq_len) + " nh=" + std::to_string(heads) +
           " hs=" + std::to_string(head_size);
  }
};

// As the attention block calls them: q, k and v read out of one qkv row of
// 3C (+ a gap column) at offsets 0, C, 2C, and merged back into a poisoned
// qkv-like buffer; the gap columns are never written.
TEST_P(TransformerOps, RowsToHeadsAndHeadsToRowsAreTheCpusCopies) {
  SCOPED_TRACE(seed_text());
  for (const PermuteShape s :
       {PermuteShape{1, 1, 1, 1}, PermuteShape{2, 5, 3, 7}, PermuteShape{3, 37, 4, 24}, PermuteShape{0, 4, 2, 3}}) {
    SCOPED_TRACE("permutes " + s.text());
    const int c = s.heads * s.head_size, stride = 3 * c + 1;
    const size_t rows = static_cast<size_t>(s.batch) * s.seq_len;
    const size_t heads_count = rows * c;
    const std::vector<lowp16> qkv = fmt.random(rng, rows * stride);
    DeviceArray<lowp16> d_qkv(qkv), d_back(LowpFormat::poison(rows * stride));
    std::vector<lowp16> want_back = LowpFormat::poison(rows * stride);
    for (int part = 0; part < 3; ++part) {
      const size_t offset = static_cast<size_t>(part) * c;
      std::vector<lowp16> want(heads_count);
      cpu::rows_to_heads(pool, qkv.data() + offset, stride, s.batch, s.seq_len, s.heads, s.head_size, want.data());
      DeviceArray<lowp16> d_heads(LowpFormat::poison(heads_count));
      launch_rows_to_heads_lowp(nullptr, d_qkv.get() + offset, stride, s.batch, s.seq_len, s.heads, s.head_size,
                                d_heads.get());
      expect_same_bits(fmt, d_heads.download(), want, "rows_to_heads part " + std::to_string(part));
      cpu::heads_to_rows(pool, want.data(), s.batch, s.seq_len, s.heads, s.head_size, want_back.data() + offset,
                         stride);
      launch_heads_to_rows_lowp(nullptr, d_heads.get(), s.batch, s.seq_len, s.heads, s.head_size, d_back.get() + offset,
                                stride);
    }
    const std::vector<lowp16> back = d_back.download();
    expect_same_bits(fmt, back, want_back, "heads_to_rows");
    size_t gap_written = 0, differs = 0;
    for (size_t i = 0; i < back.size(); ++i) {
      if (i % stride == static_cast<size_t>(3 * c))
        gap_written += back[i].bits != kPoisonHalfBits;
      else
        differs += back[i].bits != qkv[i].bits;
    }
    EXPECT_EQ(gap_written, 0u) << "a column past 3C was written";
    EXPECT_EQ(differs, 0u) << "the merge of the split is not the identity";
  }
}

TEST_P(TransformerOps, PermutesRefuseAStrideNarrowerThanTheHeads) {
  DeviceArray<lowp16> d(64);
  EXPECT_THROW(launch_rows_to_heads_lowp(nullptr, d.get(), 5, 1, 2, 2, 3, d.get()), Error);
  EXPECT_THROW(launch_heads_to_rows_lowp(nullptr, d.get(), 1, 2, 2, 3, d.get(), 5), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, TransformerOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
