// test_rmsnorm.cpp: the RMSNorm ops (kernels/ops/rmsnorm.h), FP16 and
// BF16: the CPU rows against a double-precision RMSNorm with the format's
// two roundings (forward) and the header's formulas (backward), the
// formulas against central differences of the forward in double, and the
// CUDA rows (forward; the backward's dx, per-chunk weight partials and their
// finish) against the CPU rows (op_test_support.h).
//
// Tolerances. u = 2^-24 (FP32's unit roundoff), n the length of a sum,
// order(n) = fp32_order_rel_tol(n) = max(1e-5, 2 n u), and, between the CPU
// and CUDA rows, order_tol(n) = max(2e-5, order(n)) (a GPU contracts into
// FMAs: tests/cuda's 2e-5), as test_layernorm.cpp. 2^-24 is an absolute
// floor throughout: FP16's subnormal step.
// - rstd: an FP32 sum of squares in another order than the reference's.
// - y: rstd's error can move x * rstd across a rounding boundary of the
//   format, flipping h by one of its ulps; weight * h then moves by
//   |weight| ulp(h), which can round to two ulps of y (ulp(h)/|h| can be
//   twice ulp(y)/|y|), so "within one ulp of the format" does not bound y
//   (about 1 element in 10^5 of these inputs breaks it). y is held instead
//   to what it can be: h is monotone in rstd and y in h, so y lies between
//   the ys of rstd's two tolerance ends (y_bounds), which is bitwise
//   wherever no boundary is within reach.
// - dx: the FP32 row sum mean(g * xhat) in another order (order(cols) times
//   the magnitude of the terms that cancel), then one rounding
//   (fmt.rel_tol()).
// - dweight: its terms dy * h are exact in FP32 (two 16-bit values) and the
//   same in both rows; only the order of the column sum differs:
//   order(rows) times sum |dy h| (plus the old value's), then one rounding.
//   Up to kRmsNormRowsPerChunk rows (one chunk) both rows sum in the same
//   order: bitwise (an FMA of an exact product rounds as the add does).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/op_test_support.h"
#include "kernels/ops/rmsnorm.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class RmsNorm : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

const double kU = std::ldexp(1.0, -24);  // FP32's unit roundoff
constexpr double kSubnormalStep = 6e-8;  // 2^-24: FP16's subnormal step, a floor in both formats

std::vector<float> nan_floats(size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

// The FP32 summation-order tolerance between the CPU and CUDA rows.
double order_tol(size_t count) { return std::max(2e-5, fp32_order_rel_tol(count)); }

struct RmsShape {
  int rows, cols;
  std::string text() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

// Rows with a spread of their own (rstd from about 0.4 to 30).
std::vector<lowp16> rmsnorm_input(const LowpFormat& fmt, std::mt19937_64& rng, int rows, int cols) {
  std::vector<lowp16> x;
  std::uniform_real_distribution<float> spread(0.1f, 4.0f);
  for (int r = 0; r < rows; ++r) {
    const float s = spread(rng);
    for (const lowp16 h : fmt.random(rng, static_cast<size_t>(cols))) x.push_back(fmt.narrow(s * fmt.widen(h)));
  }
  return x;
}

RmsNormForward forward_op(const lowp16* x, const lowp16* weight, int rows, int cols, lowp16* y, float* rstd) {
  RmsNormForward op;
  op.x = x;
  op.weight = weight;
  op.rows = rows;
  op.cols = cols;
  op.eps = kRmsNormEps;
  op.y = y;
  op.rstd = rstd;
  return op;
}

RmsNormBackward backward_op(const lowp16* dy, const lowp16* x, const lowp16* weight, const float* rstd, int rows,
                            int cols, lowp16* dx, bool accumulate_dx, lowp16* dweight, bool accumulate_weight) {
  RmsNormBackward op;
  op.dy = dy;
  op.x = x;
  op.weight = weight;
  op.rstd = rstd;
  op.rows = rows;
  op.cols = cols;
  op.dx = dx;
  op.accumulate_dx = accumulate_dx;
  op.dweight = dweight;
  op.accumulate_weight = accumulate_weight;
  return op;
}

// ---- double-precision references --------------------------------------------

// rstd per row in double: 1 / sqrt(mean(x^2) + eps), eps the FP32 constant.
std::vector<double> rstd_reference(const std::vector<double>& x, int rows, int cols, double eps) {
  std::vector<double> rstd(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    double sum_sq = 0.0;
    for (int c = 0; c < cols; ++c)
      sum_sq += x[static_cast<size_t>(r) * cols + c] * x[static_cast<size_t>(r) * cols + c];
    rstd[static_cast<size_t>(r)] = 1.0 / std::sqrt(sum_sq / cols + eps);
  }
  return rstd;
}

// The forward's y for one element with rstd `rs`, the two roundings of the
// format applied as the op applies them: h = lowp(float(x * rs)), y =
// lowp(float(weight * h)) (x * rs of a 16-bit x and an FP32 rs is exact in
// double, so float() is the FP32 product's rounding; weight * h is exact).
double y_of(const LowpFormat& fmt, double x, double weight, double rs) {
  const double h = fmt.rounded(static_cast<float>(x * rs));
  return fmt.rounded(static_cast<float>(weight * h));
}

// The ys an rstd within a relative `rel` of `rs` can give: rounding is
// monotone, so h moves one way with rstd and y one way with h; the ends
// bound every rstd in between.
struct YBounds {
  double lo, hi;
};
YBounds y_bounds(const LowpFormat& fmt, double x, double weight, double rs, double rel) {
  const double slack = rel + 1e-12;  // the double products' own roundings
  const double a = y_of(fmt, x, weight, rs * (1.0 - slack)), b = y_of(fmt, x, weight, rs * (1.0 + slack));
  return {std::min(a, b), std::max(a, b)};
}

// y (16-bit words) within y_bounds of the rstd `rs` per row and `rel`.
void expect_y_within(const LowpFormat& fmt, const std::vector<lowp16>& y, const std::vector<lowp16>& x,
                     const std::vector<lowp16>& weight, const std::vector<double>& rs, double rel, int cols,
                     const std::string& what) {
  ASSERT_EQ(y.size(), x.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < y.size() && reported < 5; ++i) {
    const size_t r = i / static_cast<size_t>(cols), c = i % static_cast<size_t>(cols);
    const YBounds b = y_bounds(fmt, fmt.widen(x[i]), fmt.widen(weight[c]), rs[r], rel);
    const double got = fmt.widen(y[i]);
    if (got >= b.lo && got <= b.hi) continue;  // NaN never passes
    ADD_FAILURE() << what << "[" << i << "]: got " << got << ", want within [" << b.lo << ", " << b.hi << "] (rstd "
                  << rs[r] << ", rel " << rel << ")";
    ++reported;
  }
}

// |got - want| <= rel * |want| + floor[i], FP32 against double.
void expect_close_each(const std::vector<float>& got, const std::vector<double>& want, double rel,
                       const std::vector<double>& floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(floor.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    if (std::fabs(got[i] - want[i]) <= rel * std::fabs(want[i]) + floor[i]) continue;  // NaN never passes
    ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (rel " << rel << ", abs "
                  << floor[i] << ")";
    ++reported;
  }
}

// The header's backward formulas in double, from the given rstd per row:
// xhat = x * rstd, g = weight * dy, dx = rstd (g - xhat mean_c(g xhat)),
// dweight[c] = sum_r dy * hidden(xhat) (hidden: the forward's rounding, or
// the identity for the exact gradient). The magnitudes: per element of dx,
// rstd (|g| + |xhat| mean_c|g xhat|), the scale of the terms that cancel;
// per column of dweight, sum_r |dy hidden(xhat)|.
struct RmsNormGradReference {
  std::vector<double> dx, dx_magnitude, dweight, dweight_magnitude;
};
RmsNormGradReference rmsnorm_grad_reference(const std::vector<double>& dy, const std::vector<double>& x,
                                            const std::vector<double>& weight, const std::vector<double>& rstd,
                                            int rows, int cols, const std::function<double(double)>& hidden) {
  RmsNormGradReference ref;
  ref.dx.resize(x.size());
  ref.dx_magnitude.resize(x.size());
  ref.dweight.assign(static_cast<size_t>(cols), 0.0);
  ref.dweight_magnitude.assign(static_cast<size_t>(cols), 0.0);
  for (int r = 0; r < rows; ++r) {
    const double rs = rstd[static_cast<size_t>(r)];
    double mean_gx = 0.0, mean_abs_gx = 0.0;
    for (int c = 0; c < cols; ++c) {
      const size_t at = static_cast<size_t>(r) * cols + c;
      const double xhat = x[at] * rs, g = weight[static_cast<size_t>(c)] * dy[at];
      mean_gx += g * xhat / cols;
      mean_abs_gx += std::fabs(g * xhat) / cols;
      const double term = dy[at] * hidden(xhat);
      ref.dweight[static_cast<size_t>(c)] += term;
      ref.dweight_magnitude[static_cast<size_t>(c)] += std::fabs(term);
    }
    for (int c = 0; c < cols; ++c) {
      const size_t at = static_cast<size_t>(r) * cols + c;
      const double xhat = x[at] * rs, g = weight[static_cast<size_t>(c)] * dy[at];
      ref.dx[at] = rs * (g - xhat * mean_gx);
      ref.dx_magnitude[at] = rs * (std::fabs(g) + std::fabs(xhat) * mean_abs_gx);
    }
  }
  return ref;
}

std::vector<double> as_doubles(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// ---- (a), (b): the CPU rows against double ----------------------------------

// The CPU forward against rstd in double and the format's two roundings
// applied to double values. rstd: the sequential FP32 sum of n squares
// (each rounded once) is within n u of the exact one, relative (positive
// terms), the division by cols and the + eps add u each, the square root
// halves all that and adds u, the reciprocal adds u: within (n/2 + 3) u
// <= 4 n u relative. y: the two roundings are the reference's, so y is
// bitwise the reference's unless rstd's error moves x * rstd across a
// rounding boundary: y within y_bounds of rstd_double with rel 4 n u.
TEST_P(RmsNorm, ForwardCpuRowMatchesDouble) {
  SCOPED_TRACE(seed_text());
  for (const RmsShape s : {RmsShape{1, 1}, RmsShape{1, 31}, RmsShape{9, 33}, RmsShape{3, 257}, RmsShape{29, 96}}) {
    SCOPED_TRACE("rmsnorm " + s.text());
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols);
    const std::vector<lowp16> x = rmsnorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> weight = fmt.random(rng, cols, -1.5f, 1.5f);
    std::vector<lowp16> y = LowpFormat::poison(n);
    std::vector<float> rstd = nan_floats(static_cast<size_t>(s.rows));
    rmsnorm_forward_lowp(cpu, forward_op(x.data(), weight.data(), s.rows, s.cols, y.data(), rstd.data()));
    const std::vector<double> exact = rstd_reference(fmt.widened_doubles(x), s.rows, s.cols, kRmsNormEps);
    const double rstd_rel = 4.0 * static_cast<double>(cols) * kU;
    expect_close_each(rstd, exact, rstd_rel, std::vector<double>(exact.size(), 0.0), "rstd");
    expect_y_within(fmt, y, x, weight, exact, rstd_rel, s.cols, "y");
  }
}

// The CPU backward against the header's formulas in double, from the same
// FP32 rstd (the forward's) and the same h (lowp(float(x * rstd)): exact
// in double, then the FP32 and format roundings the CPU makes), every
// combination of the accumulate flags.
// - dx: xhat (u), g (exact: two 16-bit values), g * xhat (u), a
//   sequential sum of n terms ((n - 1) u of sum |g xhat|), / n (u), then
//   xhat * mean, g - it, rstd * it (3u of the magnitude), the old dx's add
//   (u of |old| + |dx|): within (n + 6) u <= order(n) of rstd (|g| + |xhat|
//   mean|g xhat|) + |old|; then one rounding, half an ulp: fmt.rel_tol()
//   of |want|, and FP16's subnormal step.
// - dweight: exact terms dy * h, a sequential sum of rows terms plus the
//   old value: order(rows) of sum |dy h| + |old|; one rounding.
TEST_P(RmsNorm, BackwardCpuRowMatchesDouble) {
  SCOPED_TRACE(seed_text());
  for (const RmsShape s : {RmsShape{1, 1}, RmsShape{9, 33}, RmsShape{3, 257}, RmsShape{70, 96}, RmsShape{130, 40}}) {
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols),
                 rows = static_cast<size_t>(s.rows);
    const std::vector<lowp16> x = rmsnorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> weight = fmt.random(rng, cols, -1.5f, 1.5f);
    const std::vector<lowp16> dy = fmt.random(rng, n), prev_dx = fmt.random(rng, n), prev_dw = fmt.random(rng, cols);
    std::vector<lowp16> y(n);
    std::vector<float> rstd(rows);
    rmsnorm_forward_lowp(cpu, forward_op(x.data(), weight.data(), s.rows, s.cols, y.data(), rstd.data()));
    const RmsNormGradReference ref = rmsnorm_grad_reference(
        fmt.widened_doubles(dy), fmt.widened_doubles(x), fmt.widened_doubles(weight), as_doubles(rstd), s.rows, s.cols,
        [&](double xhat) { return static_cast<double>(fmt.rounded(static_cast<float>(xhat))); });
    for (const bool acc_dx : {false, true})
      for (const bool acc_w : {false, true}) {
        SCOPED_TRACE("rmsnorm backward " + s.text() + (acc_dx ? " accumulate dx" : "") +
                     (acc_w ? " accumulate weight" : ""));
        std::vector<lowp16> dx = acc_dx ? prev_dx : LowpFormat::poison(n);
        std::vector<lowp16> dweight = acc_w ? prev_dw : LowpFormat::poison(cols);
        rmsnorm_backward_lowp(cpu, backward_op(dy.data(), x.data(), weight.data(), rstd.data(), s.rows, s.cols,
                                               dx.data(), acc_dx, dweight.data(), acc_w));
        std::vector<double> want_dx(n), dx_floor(n), want_dw(cols), dw_floor(cols);
        for (size_t i = 0; i < n; ++i) {
          const double old = acc_dx ? fmt.widen(prev_dx[i]) : 0.0;
          want_dx[i] = ref.dx[i] + old;
          dx_floor[i] = fp32_order_rel_tol(cols) * (ref.dx_magnitude[i] + std::fabs(old)) + kSubnormalStep;
        }
        for (size_t c = 0; c < cols; ++c) {
          const double old = acc_w ? fmt.widen(prev_dw[c]) : 0.0;
          want_dw[c] = ref.dweight[c] + old;
          dw_floor[c] = fp32_order_rel_tol(rows) * (ref.dweight_magnitude[c] + std::fabs(old)) + kSubnormalStep;
        }
        expect_close_each(fmt.widened(dx), want_dx, fmt.rel_tol(), dx_floor, "dx");
        expect_close_each(fmt.widened(dweight), want_dw, fmt.rel_tol(), dw_floor, "dweight");
      }
  }
}

// The formulas are the gradient: on a 3x5 shape, L = sum dy * y with the
// forward in double (no roundings: h is the identity), central differences
// (step 1e-6: truncation about step^2 |L'''| / 6, L''' up to rstd^3 ~ 5e3
// here, and cancellation about 1e-16 |L| / step, both under 1e-8) against
// the double formulas to 1e-6 (a term of the formula lost or wrong is off
// by orders of magnitude more), and the CPU
// row's dx and dweight against them to the format's precision (the CPU's
// rstd, xhat and h carry FP32 and one 16-bit rounding: fmt.rel_tol() of
// the magnitude of the terms, as above, plus the subnormal step).
TEST_P(RmsNorm, BackwardIsTheGradientOfTheForward) {
  SCOPED_TRACE(seed_text());
  const int rows = 3, cols = 5;
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<lowp16> x16 = rmsnorm_input(fmt, rng, rows, cols);
  const std::vector<lowp16> w16 = fmt.random(rng, cols, -1.5f, 1.5f), dy16 = fmt.random(rng, n);
  const std::vector<double> x = fmt.widened_doubles(x16), w = fmt.widened_doubles(w16), dy = fmt.widened_doubles(dy16);
  const double eps = kRmsNormEps;
  const auto loss = [&](const std::vector<double>& xs, const std::vector<double>& ws) {
    const std::vector<double> rs = rstd_reference(xs, rows, cols, eps);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += dy[i] * ws[i % cols] * xs[i] * rs[i / cols];
    return sum;
  };
  const RmsNormGradReference ref = rmsnorm_grad_reference(dy, x, w, rstd_reference(x, rows, cols, eps), rows, cols,
                                                          [](double xhat) { return xhat; });
  const double step = 1e-6;
  std::vector<double> fd_dx(n), fd_dw(static_cast<size_t>(cols));
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> up = x, down = x;
    up[i] += step;
    down[i] -= step;
    fd_dx[i] = (loss(up, w) - loss(down, w)) / (2 * step);
    EXPECT_NEAR(ref.dx[i], fd_dx[i], 1e-6 * (1.0 + std::fabs(fd_dx[i]))) << "dx[" << i << "]";
  }
  for (size_t c = 0; c < static_cast<size_t>(cols); ++c) {
    std::vector<double> up = w, down = w;
    up[c] += step;
    down[c] -= step;
    fd_dw[c] = (loss(x, up) - loss(x, down)) / (2 * step);
    EXPECT_NEAR(ref.dweight[c], fd_dw[c], 1e-6 * (1.0 + std::fabs(fd_dw[c]))) << "dweight[" << c << "]";
  }
  std::vector<lowp16> y(n), dx = LowpFormat::poison(n), dweight = LowpFormat::poison(cols);
  std::vector<float> rstd(static_cast<size_t>(rows));
  rmsnorm_forward_lowp(cpu, forward_op(x16.data(), w16.data(), rows, cols, y.data(), rstd.data()));
  rmsnorm_backward_lowp(cpu, backward_op(dy16.data(), x16.data(), w16.data(), rstd.data(), rows, cols, dx.data(), false,
                                         dweight.data(), false));
  std::vector<double> dx_floor(n), dw_floor(static_cast<size_t>(cols));
  for (size_t i = 0; i < n; ++i) dx_floor[i] = fmt.rel_tol() * ref.dx_magnitude[i] + kSubnormalStep;
  for (size_t c = 0; c < static_cast<size_t>(cols); ++c)
    dw_floor[c] = fmt.rel_tol() * ref.dweight_magnitude[c] + kSubnormalStep;
  expect_close_each(fmt.widened(dx), fd_dx, fmt.rel_tol(), dx_floor, "CPU dx against central differences");
  expect_close_each(fmt.widened(dweight), fd_dw, fmt.rel_tol(), dw_floor, "CPU dweight against central differences");
}

// ---- (c): the CUDA rows against the CPU rows --------------------------------

// One row, one column, odd widths below and past a warp's 32 lanes and past
// 256, rows past one block's 8 warps and (70, 130) past the grid the SIMT
// executor's build caps at 3 blocks (the row loop's later passes).
// rstd: order_tol(cols); y: within y_bounds of the CPU's rstd and that
// tolerance.
TEST_P(RmsNorm, ForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const RmsShape s :
       {RmsShape{1, 1}, RmsShape{1, 31}, RmsShape{9, 33}, RmsShape{3, 257}, RmsShape{70, 96}, RmsShape{130, 40}}) {
    SCOPED_TRACE("rmsnorm " + s.text());
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols),
                 rows = static_cast<size_t>(s.rows);
    const std::vector<lowp16> x = rmsnorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> weight = fmt.random(rng, cols, -1.5f, 1.5f);
    std::vector<lowp16> want_y = LowpFormat::poison(n);
    std::vector<float> want_rstd = nan_floats(rows);
    rmsnorm_forward_lowp(cpu, forward_op(x.data(), weight.data(), s.rows, s.cols, want_y.data(), want_rstd.data()));
    DeviceArray<lowp16> d_x(x), d_weight(weight), d_y(LowpFormat::poison(n));
    DeviceArray<float> d_rstd(nan_floats(rows));
    rmsnorm_forward_lowp_cuda(cuda, forward_op(d_x.get(), d_weight.get(), s.rows, s.cols, d_y.get(), d_rstd.get()));
    const double tol = order_tol(cols);
    expect_close(d_rstd.download(), want_rstd, tol, 0.0, "rstd");
    expect_y_within(fmt, d_y.download(), x, weight, as_doubles(want_rstd), tol, s.cols, "y");
  }
}

// The backward from the CPU's rstd: dx (one warp per row), dweight (chunks
// of 64 rows: one, a partial one, two, three, and 260x3's five, past the
// SIMT build's cap of 3 on gridDim.y: the chunk loop's stride; 128-thread
// blocks of columns: one and three), every combination of the two
// accumulate flags. dweight is bitwise up to one chunk of rows.
TEST_P(RmsNorm, BackwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const RmsShape s : {RmsShape{1, 1}, RmsShape{1, 31}, RmsShape{9, 33}, RmsShape{3, 257}, RmsShape{70, 96},
                           RmsShape{130, 40}, RmsShape{260, 3}}) {
    const size_t n = static_cast<size_t>(s.rows) * s.cols, cols = static_cast<size_t>(s.cols),
                 rows = static_cast<size_t>(s.rows);
    const std::vector<lowp16> x = rmsnorm_input(fmt, rng, s.rows, s.cols);
    const std::vector<lowp16> weight = fmt.random(rng, cols, -1.5f, 1.5f);
    const std::vector<lowp16> dy = fmt.random(rng, n), prev_dx = fmt.random(rng, n), prev_dw = fmt.random(rng, cols);
    std::vector<lowp16> y(n);
    std::vector<float> rstd(rows);
    rmsnorm_forward_lowp(cpu, forward_op(x.data(), weight.data(), s.rows, s.cols, y.data(), rstd.data()));
    const RmsNormGradReference ref = rmsnorm_grad_reference(
        fmt.widened_doubles(dy), fmt.widened_doubles(x), fmt.widened_doubles(weight), as_doubles(rstd), s.rows, s.cols,
        [&](double xhat) { return static_cast<double>(fmt.rounded(static_cast<float>(xhat))); });
    DeviceArray<lowp16> d_dy(dy), d_x(x), d_weight(weight);
    DeviceArray<float> d_rstd(rstd);
    for (const bool acc_dx : {false, true})
      for (const bool acc_w : {false, true}) {
        SCOPED_TRACE("rmsnorm backward " + s.text() + (acc_dx ? " accumulate dx" : "") +
                     (acc_w ? " accumulate weight" : ""));
        std::vector<lowp16> want_dx = acc_dx ? prev_dx : LowpFormat::poison(n);
        std::vector<lowp16> want_dw = acc_w ? prev_dw : LowpFormat::poison(cols);
        DeviceArray<lowp16> d_dx(want_dx), d_dw(want_dw);
        rmsnorm_backward_lowp(cpu, backward_op(dy.data(), x.data(), weight.data(), rstd.data(), s.rows, s.cols,
                                               want_dx.data(), acc_dx, want_dw.data(), acc_w));
        rmsnorm_backward_lowp_cuda(cuda, backward_op(d_dy.get(), d_x.get(), d_weight.get(), d_rstd.get(), s.rows,
                                                     s.cols, d_dx.get(), acc_dx, d_dw.get(), acc_w));
        std::vector<double> dx_floor(n), dw_floor(cols);
        for (size_t i = 0; i < n; ++i) {
          const double old = acc_dx ? std::fabs(fmt.widen(prev_dx[i])) : 0.0;
          dx_floor[i] = order_tol(cols) * (ref.dx_magnitude[i] + old) + kSubnormalStep;
        }
        for (size_t c = 0; c < cols; ++c) {
          const double old = acc_w ? std::fabs(fmt.widen(prev_dw[c])) : 0.0;
          dw_floor[c] = order_tol(rows) * (ref.dweight_magnitude[c] + old) + kSubnormalStep;
        }
        expect_close_each(fmt, d_dx.download(), want_dx, fmt.rel_tol(), dx_floor, "dx");
        if (s.rows <= kRmsNormRowsPerChunk) {
          expect_same_bits(fmt, d_dw.download(), want_dw, "dweight (one chunk)");
        } else {
          expect_close_each(fmt, d_dw.download(), want_dw, fmt.rel_tol(), dw_floor, "dweight");
        }
      }
  }
}

// ---- (d): shapes -------------------------------------------------------------

// The error of `run`, which must throw ddp::Error naming `name`.
template <class Fn>
void expect_refused(Fn run, const std::string& name, const std::string& what) {
  try {
    run();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << what << ": " << e.what();
  }
}

TEST_P(RmsNorm, RefusesNoColumns) {
  std::vector<lowp16> h(1);
  std::vector<float> hf(1);
  DeviceArray<lowp16> d(1);
  DeviceArray<float> f(1);
  expect_refused([&] { rmsnorm_forward_lowp(cpu, forward_op(h.data(), h.data(), 1, 0, h.data(), hf.data())); },
                 RmsNormForward::kName, "CPU forward");
  expect_refused([&] { rmsnorm_forward_lowp_cuda(cuda, forward_op(d.get(), d.get(), 1, 0, d.get(), f.get())); },
                 RmsNormForward::kName, "CUDA forward");
  expect_refused(
      [&] {
        rmsnorm_backward_lowp(
            cpu, backward_op(h.data(), h.data(), h.data(), hf.data(), 1, 0, h.data(), false, h.data(), false));
      },
      RmsNormBackward::kName, "CPU backward");
  expect_refused(
      [&] {
        rmsnorm_backward_lowp_cuda(
            cuda, backward_op(d.get(), d.get(), d.get(), f.get(), 1, 0, d.get(), false, d.get(), false));
      },
      RmsNormBackward::kName, "CUDA backward");
}

// rows == 0: dweight is an empty sum, 0, unless accumulating (then it keeps
// its value), in both rows (the header's contract, LayerNorm's rule).
TEST_P(RmsNorm, NoRowsGivesAZeroWeightGradientOrLeavesTheSum) {
  const int cols = 7;
  const std::vector<lowp16> weight = fmt.random(rng, cols), old_dw = fmt.random(rng, cols);
  for (const bool acc_w : {false, true}) {
    SCOPED_TRACE(acc_w ? "accumulate weight" : "overwrite weight");
    std::vector<lowp16> dw = old_dw;
    rmsnorm_forward_lowp(cpu, forward_op(nullptr, weight.data(), 0, cols, nullptr, nullptr));
    rmsnorm_backward_lowp(
        cpu, backward_op(nullptr, nullptr, weight.data(), nullptr, 0, cols, nullptr, true, dw.data(), acc_w));
    const std::vector<lowp16> want = acc_w ? old_dw : std::vector<lowp16>(cols, lowp16{0});
    expect_same_bits(fmt, dw, want, "CPU dweight");
    DeviceArray<lowp16> d_weight(weight), d_dw(old_dw);
    rmsnorm_forward_lowp_cuda(cuda, forward_op(nullptr, d_weight.get(), 0, cols, nullptr, nullptr));
    rmsnorm_backward_lowp_cuda(
        cuda, backward_op(nullptr, nullptr, d_weight.get(), nullptr, 0, cols, nullptr, false, d_dw.get(), acc_w));
    expect_same_bits(fmt, d_dw.download(), want, "CUDA dweight");
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, RmsNorm, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
