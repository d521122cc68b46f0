// test_gemm_epilogue_ops.cpp: cuda_gemm_epilogue.cu's kernels (the GemmLowp
// epilogue applied to an FP32 GEMM result, ReLU's gradient applied in place
// to a rounded one) and its bias-gradient launcher (the column sums of
// cuda_elementwise.cu on op(A)'s strided view) against the CPU loops of
// cpu_elementwise.h (narrow_rows, bias_grad_op_a), FP16 and BF16
// (op_test_support.h).
//
// Tolerances: the epilogue kernel and narrow_rows get the same FP32 values,
// so no summation order is involved. Bias, ReLU, ReLU's gradient and the
// pre-activation output are the same FP32 operations and one rounding on
// both sides: bitwise. GELU and its gradient go through erff/expf/tanhf,
// whose last FP32 bits differ between CUDA and glibc (and the CPU computes
// the tanh form as z * sigmoid(2u) with its own exp, cpu_gelu_tanh.h): two
// ulps of the format, plus 4 FP32 ulps of |v| where 1 + erf or 1 + tanh
// cancels, plus for the gradients the bound of
// support/gemm_epilogue_support.h on the FP32 error of the slope where
// cdf + z pdf cancels (as tests/cuda/cuda_test_gemm_epilogues.cpp). The
// bias gradient sums in another order than the CPU's: the FP32 order
// tolerance on sum|terms|.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/ops/op_test_support.h"
#include "support/gemm_epilogue_support.h"

namespace ddp::test {
namespace {

using GemmEpilogueOps = OpTest;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kFp32Ulp = 1.0 / (1 << 24);  // 2^-24
constexpr double kFp16SubnormalStep = 6e-8;   // 2^-24

// An output [m, ld] (ld = n + pad) starting `offset` elements into its
// allocation, as a view of a flat buffer.
struct View {
  int m, n, pad;
  size_t offset;
  int ld() const { return n + pad; }
  size_t count() const { return offset + static_cast<size_t>(m) * ld(); }
  bool inside(size_t idx) const {
    return idx >= offset && static_cast<int>((idx - offset) % static_cast<size_t>(ld())) < n;
  }
  size_t at(int i, int j) const { return offset + static_cast<size_t>(i) * ld() + j; }
};

std::string view_text(const View& v) {
  return std::to_string(v.m) + "x" + std::to_string(v.n) + " pad " + std::to_string(v.pad) + " offset " +
         std::to_string(v.offset);
}

// One row, one element; a row wider than a block of 256 threads; odd
// shapes with padded rows at an odd offset (2-byte-aligned views); m = 0.
const View kViews[] = {{1, 1, 0, 0}, {3, 257, 0, 1}, {37, 29, 3, 1}, {0, 5, 1, 0}};

struct Epilogue {
  bool bias;
  Activation act;
  bool pre_activation;
  Activation dact;
};

std::string epilogue_text(const Epilogue& e) {
  return std::string(e.bias ? "bias, " : "") + "act " + activation_name(e.act) +
         (e.pre_activation ? ", pre-activation" : "") + ", dact " + activation_name(e.dact);
}

// C = epilogue(acc), acc the FP32 [m, n] GEMM result (alpha applied, beta
// 0): every activation and gradient, with and without a bias and the
// pre-activation output, C and the pre-activation poisoned, their padding
// and prefix left as they were. A few accumulator values are +-Inf and NaN
// (their Z fixed at 1, where every slope is positive).
TEST_P(GemmEpilogueOps, EpilogueOnAnFp32ResultIsTheCpuNarrowing) {
  SCOPED_TRACE(seed_text());
  const Epilogue epilogues[] = {
      {false, Activation::None, false, Activation::None},    {true, Activation::None, true, Activation::None},
      {true, Activation::Relu, false, Activation::None},     {false, Activation::Relu, true, Activation::None},
      {false, Activation::Gelu, true, Activation::None},     {true, Activation::Gelu, false, Activation::None},
      {true, Activation::GeluTanh, true, Activation::None},  {false, Activation::GeluTanh, false, Activation::None},
      {true, Activation::None, false, Activation::Relu},     {false, Activation::None, false, Activation::Gelu},
      {true, Activation::None, false, Activation::GeluTanh}, {false, Activation::None, false, Activation::GeluTanh},
  };
  for (const View& view : kViews)
    for (const Epilogue& e : epilogues) {
      const std::string what = view_text(view) + ", " + epilogue_text(e);
      const size_t mn = static_cast<size_t>(view.m) * view.n;
      std::vector<float> acc = random_floats(rng, mn, -4.0f, 4.0f);
      const std::vector<lowp16> bias = fmt.random(rng, view.offset + view.n);
      std::vector<lowp16> z = fmt.random(rng, view.count(), -3.0f, 3.0f);
      for (size_t i = 0; i < z.size(); i += 7) z[i] = fmt.narrow(i % 2 ? 0.0f : -0.0f);
      if (mn > 10) {
        const std::pair<size_t, float> specials[] = {{1, kInf}, {mn / 2, -kInf}, {mn - 1, NAN}};
        for (const auto& [at, value] : specials) {
          acc[at] = value;
          z[view.at(static_cast<int>(at / view.n), static_cast<int>(at % view.n))] = fmt.narrow(1.0f);
        }
      }
      // The CPU: narrow_rows with the bias widened, C and pre-activation
      // poisoned as on the device.
      std::vector<float> bias_fp32(view.n);
      for (int j = 0; j < view.n; ++j) bias_fp32[j] = fmt.widen(bias[view.offset + j]);
      std::vector<lowp16> want_c = LowpFormat::poison(view.count()), want_pre = LowpFormat::poison(view.count());
      cpu::NarrowEpilogue ce;
      ce.bias_fp32 = e.bias ? bias_fp32.data() : nullptr;
      ce.act = e.act;
      ce.pre_activation = e.pre_activation ? want_pre.data() + view.offset : nullptr;
      ce.ld_pre_activation = static_cast<size_t>(view.ld());
      ce.dact = e.dact;
      ce.dact_input = e.dact != Activation::None ? z.data() + view.offset : nullptr;
      ce.ld_dact_input = static_cast<size_t>(view.ld());
      cpu::narrow_rows(precision(), acc.data(), static_cast<size_t>(view.n), ce, want_c.data() + view.offset,
                       static_cast<size_t>(view.ld()), static_cast<size_t>(view.m), static_cast<size_t>(view.n));
      // The device.
      DeviceArray<float> d_acc(acc.empty() ? std::vector<float>(1) : acc);
      DeviceArray<lowp16> d_bias(bias), d_z(z), d_c(LowpFormat::poison(view.count())),
          d_pre(LowpFormat::poison(view.count()));
      GemmLowp g;
      g.m = view.m;
      g.n = view.n;
      g.k = 5;  // not read: acc is the product
      g.c = d_c.get() + view.offset;
      g.ldc = view.ld();
      if (e.bias) g.bias = d_bias.get() + view.offset;
      g.act = e.act;
      if (e.pre_activation) {
        g.pre_activation = d_pre.get() + view.offset;
        g.ld_pre_activation = view.ld();
      }
      g.dact = e.dact;
      if (e.dact != Activation::None) {
        g.dact_input = d_z.get() + view.offset;
        g.ld_dact_input = view.ld();
      }
      launch_gemm_epilogue_lowp(precision(), g, d_acc.get(), nullptr);
      // Floors: 0 (bitwise) unless GELU's transcendental functions are in it.
      const bool gelu = e.act == Activation::Gelu || e.act == Activation::GeluTanh || e.dact == Activation::Gelu ||
                        e.dact == Activation::GeluTanh;
      std::vector<double> floor(view.count(), 0.0);
      for (int i = 0; i < view.m && gelu; ++i)
        for (int j = 0; j < view.n; ++j) {
          const size_t at = view.at(i, j);
          const double v =
              static_cast<double>(acc[static_cast<size_t>(i) * view.n + j]) + (e.bias ? bias_fp32[j] : 0.0);
          if (!std::isfinite(v)) continue;
          const double zd = fmt.widen(z[at]);
          double slope_error = 0.0;
          if (e.dact == Activation::Gelu)
            slope_error = 4.0 * kFp32Ulp * (std::fabs(gelu_cdf_exact(zd)) + std::fabs(zd * gelu_pdf_exact(zd)));
          if (e.dact == Activation::GeluTanh) slope_error = gelu_tanh_derivative_fp32_error(zd);
          floor[at] = (4.0 * kFp32Ulp + slope_error) * std::fabs(v) + kFp16SubnormalStep;
        }
      if (gelu)
        expect_close_each(fmt, d_c.download(), want_c, fmt.rel_tol(), floor, what + ": C");
      else
        expect_same_bits(fmt, d_c.download(), want_c, what + ": C");
      if (e.pre_activation)
        expect_same_bits(fmt, d_pre.download(), want_pre, what + ": pre-activation");
      else
        expect_same_bits(fmt, d_pre.download(), LowpFormat::poison(view.count()), what + ": no pre-activation");
    }
}

// C = relu'(Z) * C in place on a rounded GEMM result: the bits of the fused
// ReLU gradient (narrow_rows with dact ReLU on C widened, exact), for Z
// of both signs, +-0 and NaN (relu' 0) and C holding +-0, +-Inf and NaN;
// C's padding and prefix keep what they held.
TEST_P(GemmEpilogueOps, ReluGradientInPlaceIsTheFusedReluGradient) {
  SCOPED_TRACE(seed_text());
  for (const View& view : kViews) {
    const std::string what = "relu gradient in place " + view_text(view);
    std::vector<lowp16> c = fmt.random(rng, view.count(), -2.0f, 2.0f);
    std::vector<lowp16> z = fmt.random(rng, view.count(), -3.0f, 3.0f);
    for (size_t i = 0; i < z.size(); i += 7) z[i] = fmt.narrow(i % 2 ? 0.0f : -0.0f);
    for (size_t i = 3; i < z.size(); i += 11) z[i].bits = fmt.nan_bits();
    const std::vector<uint16_t> specials = fmt.special_bits();
    for (size_t i = 0; i < specials.size() && i * 5 + 2 < c.size(); ++i) c[i * 5 + 2].bits = specials[i];
    std::vector<float> c_fp32(static_cast<size_t>(view.m) * view.n);
    for (int i = 0; i < view.m; ++i)
      for (int j = 0; j < view.n; ++j) c_fp32[static_cast<size_t>(i) * view.n + j] = fmt.widen(c[view.at(i, j)]);
    std::vector<lowp16> want = c;
    cpu::NarrowEpilogue ce;
    ce.dact = Activation::Relu;
    ce.dact_input = z.data() + view.offset;
    ce.ld_dact_input = static_cast<size_t>(view.ld());
    cpu::narrow_rows(precision(), c_fp32.data(), static_cast<size_t>(view.n), ce, want.data() + view.offset,
                     static_cast<size_t>(view.ld()), static_cast<size_t>(view.m), static_cast<size_t>(view.n));
    DeviceArray<lowp16> d_c(c), d_z(z);
    GemmLowp g;
    g.m = view.m;
    g.n = view.n;
    g.c = d_c.get() + view.offset;
    g.ldc = view.ld();
    g.dact = Activation::Relu;
    g.dact_input = d_z.get() + view.offset;
    g.ld_dact_input = view.ld();
    launch_relu_gradient_in_place_lowp(precision(), g, nullptr);
    expect_same_bits(fmt, d_c.download(), want, what);
  }
}

// bias_grad = row sums of op(A) (+ what it held), A stored [m, k] or
// transposed [k, m] with padded rows at an odd offset: k of 0, 1, past a
// block; m of 1, odd, past a block; written (poisoned before) or
// accumulated. The vector's prefix stays as it was.
TEST_P(GemmEpilogueOps, BiasGradOfOpAMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  struct Case {
    int m, k, pad;
    size_t offset;
  };
  for (const Case s : {Case{1, 1, 0, 0}, Case{37, 65, 1, 1}, Case{300, 3, 0, 1}, Case{5, 300, 2, 0}, Case{7, 0, 1, 1}})
    for (const Transpose ta : {Transpose::No, Transpose::Yes})
      for (const bool accumulate : {false, true}) {
        const bool a_t = ta == Transpose::Yes;
        const std::string what = "bias gradient m " + std::to_string(s.m) + " k " + std::to_string(s.k) +
                                 (a_t ? " (A transposed)" : "") + " pad " + std::to_string(s.pad) + " offset " +
                                 std::to_string(s.offset) + (accumulate ? ", accumulated" : "");
        const int lda = (a_t ? s.m : std::max(s.k, 1)) + s.pad;
        const size_t a_count = s.offset + static_cast<size_t>(a_t ? s.k : s.m) * lda;
        const std::vector<lowp16> a = fmt.random(rng, a_count);
        const std::vector<lowp16> db0 =
            accumulate ? fmt.random(rng, s.offset + s.m) : LowpFormat::poison(s.offset + s.m);
        std::vector<float> a_fp32(a_count);
        for (size_t i = 0; i < a_count; ++i) a_fp32[i] = fmt.widen(a[i]);
        std::vector<lowp16> want = db0;
        cpu::bias_grad_op_a(precision(), a_fp32.data() + s.offset, static_cast<size_t>(lda), a_t,
                            static_cast<size_t>(s.k), 0, static_cast<size_t>(s.m), want.data() + s.offset, accumulate);
        DeviceArray<lowp16> d_a(a), d_db(db0);
        GemmLowp g;
        g.trans_a = ta;
        g.m = s.m;
        g.n = 3;
        g.k = s.k;
        g.a = d_a.get() + s.offset;
        g.lda = lda;
        g.bias_grad = d_db.get() + s.offset;
        g.bias_grad_accumulate = accumulate;
        launch_bias_grad_op_a_lowp(precision(), g, nullptr);
        std::vector<double> floor(db0.size(), 0.0);
        for (int i = 0; i < s.m; ++i) {
          double magnitude = accumulate ? std::fabs(fmt.widen(db0[s.offset + i])) : 0.0;
          for (int p = 0; p < s.k; ++p)
            magnitude += std::fabs(
                a_fp32[s.offset + (a_t ? static_cast<size_t>(p) * lda + i : static_cast<size_t>(i) * lda + p)]);
          floor[s.offset + i] = fp32_order_rel_tol(static_cast<size_t>(s.k) + 1) * magnitude + kFp16SubnormalStep;
        }
        expect_close_each(fmt, d_db.download(), want, fmt.rel_tol(), floor, what);
      }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GemmEpilogueOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
