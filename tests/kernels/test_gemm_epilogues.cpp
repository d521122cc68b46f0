// test_gemm_epilogues.cpp: the GemmLowp epilogues of CpuBackend (bias,
// ReLU/GELU, pre-activation output, activation gradient, bias gradient of A)
// against a double-precision reference, and fused ReLU against the unfused
// sequence of GEMM and element-wise passes, bitwise. Fresh random inputs,
// outputs poisoned first, odd shapes and padded strides, one and two threads
// (the split GEMM path), F16C loops on and off; in FP16 and in BF16.
//
// Tolerances (stated once), against double: a 16-bit output is the RNE
// rounding of an FP32 value, within 2 ulps of its format relative
// (lowp_format.h: kFp16RelTol, kBf16RelTol); the
// FP32 value carries the summation error, ~k * 2^-24 * sum|terms|, for which
// we allow 1e-5 * sum|terms| (times the largest |act'|, 1.13 for GELU, where
// the error passes through the activation) + 6e-8 (one FP16 subnormal step).
// GELU's erff/expf add a few FP32 ulps, inside the same allowance except
// where gelu'(z) cancels to ~0: there an absolute c_slope_error, ~1e-7 * |v|
// (gemm_epilogue_support.h), is added.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "support/gemm_epilogue_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/gemm.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/half_convert.h"
#include "support/test_support.h"
#include "support/unfused_ops.h"

namespace ddp {
namespace {

using test::EpilogueCase;

using test::activation_name;

std::string describe(const EpilogueCase& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " ta=" + std::to_string(c.trans_a == Transpose::Yes) + " tb=" + std::to_string(c.trans_b == Transpose::Yes) +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) + " bias=" + std::to_string(c.bias) +
         " act=" + activation_name(c.act) + " pre=" + std::to_string(c.pre_activation) +
         " dact=" + activation_name(c.dact) + " bias_grad=" + std::to_string(c.bias_grad) +
         " accumulate=" + std::to_string(c.bias_grad_accumulate) + " pad=" + std::to_string(c.pad);
}

class GemmEpilogues : public ::testing::TestWithParam<Precision> {
 protected:
  GemmEpilogues() : rng(test::test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test::test_seed())); }
  void TearDown() override { set_f16c_enabled(true); }

  // Runs c on `backend` and checks every output against double, and that
  // padding and untouched outputs still hold what they held.
  void check_against_double(CpuBackend& backend, const EpilogueCase& c) {
    SCOPED_TRACE(describe(c) + " threads=" + std::to_string(backend.threads()));
    const auto in = test::make_epilogue_inputs(rng, c, fmt);
    const auto out = test::run_epilogue_case(backend, c, in);
    const auto ref = test::epilogue_reference(c, in, fmt);
    size_t bad = 0;
    for (int i = 0; i < c.m; ++i) {
      for (int j = 0; j < c.n; ++j) {
        const size_t at = static_cast<size_t>(i) * c.n + j, idx = c.c_index(i, j);
        const double floor = 1e-5 * ref.c_magnitude[at] + ref.c_slope_error[at] + 6e-8;
        if (!test::close_enough(fmt.widen(out.c[idx]), ref.c[at], fmt.rel_tol(), floor) && bad++ < 5)
          ADD_FAILURE() << "C[" << i << "," << j << "] got " << fmt.widen(out.c[idx]) << " want " << ref.c[at];
        if (c.pre_activation &&
            !test::close_enough(fmt.widen(out.pre_activation[idx]), ref.pre_activation[at], fmt.rel_tol(), floor) &&
            bad++ < 5)
          ADD_FAILURE() << "pre[" << i << "," << j << "] got " << fmt.widen(out.pre_activation[idx]) << " want "
                        << ref.pre_activation[at];
      }
      for (int j = c.n; j < c.ldc(); ++j) {  // padding untouched
        if (out.c[c.c_index(i, j)].bits != in.c0[c.c_index(i, j)].bits && bad++ < 5)
          ADD_FAILURE() << "C padding written";
        if (c.pre_activation && out.pre_activation[c.c_index(i, j)].bits != test::kPoisonHalfBits && bad++ < 5)
          ADD_FAILURE() << "pre-activation padding written";
      }
    }
    if (c.bias_grad)
      for (int i = 0; i < c.m; ++i) {
        const double got = fmt.widen(out.bias_grad[c.offset + i]);
        if (!test::close_enough(got, ref.bias_grad[i], fmt.rel_tol(), 1e-5 * ref.bias_grad_magnitude[i] + 6e-8) &&
            bad++ < 5)
          ADD_FAILURE() << "bias_grad[" << i << "] got " << got << " want " << ref.bias_grad[i];
      }
    EXPECT_EQ(bad, 0u);
  }

  test::LowpFormat fmt{GetParam()};
  CpuBackend one{1, GetParam()}, two{2, GetParam()};
  std::mt19937_64 rng;
};

const Transpose kBoth[] = {Transpose::No, Transpose::Yes};
const Activation kActs[] = {Activation::Relu, Activation::Gelu, Activation::GeluTanh};
// Odd shapes; the last two are above the split threshold of the two-thread
// backend (both split directions).
const int kShapes[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 33}, {37, 29, 65}, {256, 192, 96}, {96, 300, 130}};

TEST_P(GemmEpilogues, ForwardActivationAndPreActivationMatchDouble) {
  for (const auto& s : kShapes)
    for (Transpose ta : kBoth)
      for (Activation act : kActs)
        for (int variant = 0; variant < 2; ++variant) {
          EpilogueCase c{s[0], s[1], s[2]};
          c.trans_a = ta;
          c.trans_b = Transpose::Yes;
          c.act = act;
          c.bias = variant == 0;
          c.pre_activation = variant == 0 || act != Activation::Relu;
          c.alpha = variant == 0 ? 1.0f : 0.75f;
          c.pad = variant;
          for (CpuBackend* be : {&one, &two})
            for (bool f16c : {true, false}) {
              set_f16c_enabled(f16c);
              check_against_double(*be, c);
            }
        }
}

TEST_P(GemmEpilogues, BiasWithBetaAddsIntoCMatchesDouble) {
  // C = alpha * op(A) op(B) + beta * C + bias, rounded once: with beta 1
  // and C the residual stream, the GPT's output projection and its residual
  // add in one pass (x += y W^T + b), instead of a GEMM and add_lowp.
  for (const auto& s : kShapes)
    for (Transpose ta : kBoth)
      for (float beta : {1.0f, -0.5f}) {
        EpilogueCase c{s[0], s[1], s[2]};
        c.trans_a = ta;
        c.trans_b = Transpose::Yes;
        c.bias = true;
        c.beta = beta;
        c.pad = beta < 0 ? 2 : 0;
        for (CpuBackend* be : {&one, &two})
          for (bool f16c : {true, false}) {
            set_f16c_enabled(f16c);
            check_against_double(*be, c);
          }
      }
}

TEST_P(GemmEpilogues, ActivationGradientMatchesDouble) {
  for (const auto& s : kShapes)
    for (Transpose tb : kBoth)
      for (Activation dact : kActs)
        for (int pad : {0, 3}) {
          EpilogueCase c{s[0], s[1], s[2]};
          c.trans_b = tb;
          c.dact = dact;
          c.pad = pad;
          c.alpha = pad ? -1.5f : 1.0f;
          c.bias = pad != 0;
          for (CpuBackend* be : {&one, &two})
            for (bool f16c : {true, false}) {
              set_f16c_enabled(f16c);
              check_against_double(*be, c);
            }
        }
  // GELU's gradient where cdf + z pdf cancels, on long sums (large |v|):
  // the case the absolute c_slope_error of the floor is for.
  EpilogueCase near_zero{64, 96, 1024};
  near_zero.z_near_gelu_prime_zero = true;
  for (Activation dact : {Activation::Gelu, Activation::GeluTanh}) {
    near_zero.dact = dact;
    for (CpuBackend* be : {&one, &two}) check_against_double(*be, near_zero);
  }
}

TEST_P(GemmEpilogues, BiasGradientOfAMatchesDouble) {
  // The dW GEMM's form (trans_a = Yes) and the others; with and without
  // accumulation, with beta (gradient accumulation), and k = 0 / n = 0.
  for (const auto& s : kShapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth)
        for (bool accumulate : {false, true}) {
          EpilogueCase c{s[0], s[1], s[2]};
          c.trans_a = ta;
          c.trans_b = tb;
          c.bias_grad = true;
          c.bias_grad_accumulate = accumulate;
          c.beta = accumulate ? 1.0f : 0.0f;
          c.pad = accumulate ? 2 : 0;
          for (CpuBackend* be : {&one, &two}) check_against_double(*be, c);
        }
  for (const auto& s : {std::array<int, 3>{7, 9, 0}, std::array<int, 3>{7, 0, 9}}) {
    EpilogueCase c{s[0], s[1], s[2]};
    c.trans_a = Transpose::Yes;
    c.bias_grad = true;
    c.bias_grad_accumulate = true;
    c.pad = 1;
    check_against_double(one, c);
  }
}

TEST_P(GemmEpilogues, FusedReluForwardEqualsGemmThenActivationBitwise) {
  // relu(fp16(v)) == fp16(relu(v)): the fused forward gives the same bits as
  // GEMM + bias, then the activation pass.
  for (const auto& s : kShapes)
    for (CpuBackend* be : {&one, &two})
      for (bool f16c : {true, false}) {
        set_f16c_enabled(f16c);
        EpilogueCase c{s[0], s[1], s[2]};
        c.trans_b = Transpose::Yes;
        c.bias = true;
        c.act = Activation::Relu;
        SCOPED_TRACE(describe(c) + " f16c=" + std::to_string(f16c));
        const auto in = test::make_epilogue_inputs(rng, c, fmt);
        const auto fused = test::run_epilogue_case(*be, c, in).c;
        EpilogueCase plain = c;
        plain.act = Activation::None;
        Buffer<lowp16> z(*be, in.c0.size());
        z.upload(test::run_epilogue_case(*be, plain, in).c);
        Buffer<lowp16> y(*be, in.c0.size());
        y.upload(test::LowpFormat::poison(y.count()));
        test::activation_forward_lowp(Activation::Relu, z.data(), y.data(), y.count(), fmt.precision);
        const auto unfused = y.download();
        for (int i = 0; i < c.m; ++i)
          for (int j = 0; j < c.n; ++j)
            ASSERT_EQ(fused[c.c_index(i, j)].bits, unfused[c.c_index(i, j)].bits) << i << "," << j;
      }
}

TEST_P(GemmEpilogues, FusedReluGradientEqualsGemmThenActivationBackwardBitwise) {
  // fp16(relu'(z) * v) == relu'(z) * fp16(v); and relu' read from Y =
  // relu(Z) equals relu' read from Z.
  for (const auto& s : kShapes)
    for (CpuBackend* be : {&one, &two})
      for (bool f16c : {true, false}) {
        set_f16c_enabled(f16c);
        EpilogueCase c{s[0], s[1], s[2]};
        c.dact = Activation::Relu;
        SCOPED_TRACE(describe(c) + " f16c=" + std::to_string(f16c));
        auto in = test::make_epilogue_inputs(rng, c, fmt);
        const auto fused_from_z = test::run_epilogue_case(*be, c, in).c;
        auto in_y = in;
        for (auto& z : in_y.dact_input) z = fmt.narrow(relu_forward(fmt.widen(z)));
        const auto fused_from_y = test::run_epilogue_case(*be, c, in_y).c;
        EpilogueCase plain = c;
        plain.dact = Activation::None;
        Buffer<lowp16> dx(*be, in.c0.size()), z(*be, in.dact_input.size());
        dx.upload(test::run_epilogue_case(*be, plain, in).c);
        z.upload(in.dact_input);
        test::activation_backward_lowp(Activation::Relu, z.data(), dx.data(), dx.data(), dx.count(), fmt.precision);
        const auto unfused = dx.download();
        for (int i = 0; i < c.m; ++i)
          for (int j = 0; j < c.n; ++j) {
            const size_t idx = c.c_index(i, j);
            ASSERT_EQ(fused_from_z[idx].bits, unfused[idx].bits) << i << "," << j;
            ASSERT_EQ(fused_from_y[idx].bits, unfused[idx].bits) << i << "," << j;
          }
      }
}

TEST_P(GemmEpilogues, FusedBiasGradientEqualsColumnSumPassBitwise) {
  // The dW GEMM's bias gradient sums the FP16 dZ it reads, in the same FP32
  // order as the unfused column-sum pass (test::bias_grad_lowp): same bits, accumulating or not.
  for (const auto& s : kShapes)
    for (CpuBackend* be : {&one, &two})
      for (bool accumulate : {false, true}) {
        EpilogueCase c{s[0], s[1], s[2]};  // dW[m=out, n=in] = dZ[k=rows, m]^T X[k, n]
        c.trans_a = Transpose::Yes;
        c.bias_grad = true;
        c.bias_grad_accumulate = accumulate;
        SCOPED_TRACE(describe(c));
        const auto in = test::make_epilogue_inputs(rng, c, fmt);
        const auto fused = test::run_epilogue_case(*be, c, in).bias_grad;
        Buffer<lowp16> dz(*be, in.a.size()), db(*be, in.bias_grad0.size());
        dz.upload(in.a);
        db.upload(in.bias_grad0);
        test::bias_grad_lowp(dz.data(), c.k, c.m, db.data(), accumulate, fmt.precision);
        const auto unfused = db.download();
        for (int i = 0; i < c.m; ++i) ASSERT_EQ(fused[i].bits, unfused[i].bits) << i;
      }
}

TEST_P(GemmEpilogues, FusedGeluRoundsOnceWithinOneUlpOfTwoPassPath) {
  // Not bitwise: the two-pass path rounds Z to 16 bits before GELU. The fused
  // pre-activation output is that same Z, bit for bit.
  EpilogueCase c{64, 70, 50};
  c.trans_b = Transpose::Yes;
  c.bias = true;
  c.act = Activation::Gelu;
  c.pre_activation = true;
  const auto in = test::make_epilogue_inputs(rng, c, fmt);
  const auto fused = test::run_epilogue_case(one, c, in);
  EpilogueCase plain = c;
  plain.act = Activation::None;
  plain.pre_activation = false;
  const auto z = test::run_epilogue_case(one, plain, in).c;
  size_t differ = 0;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      const size_t idx = c.c_index(i, j);
      ASSERT_EQ(fused.pre_activation[idx].bits, z[idx].bits);
      const double two_pass = fmt.widen(fmt.narrow(gelu_forward(fmt.widen(z[idx]))));
      // The two-pass input is off by up to half an ulp of Z (2^-11 |Z|
      // relative in FP16, 2^-8 in BF16: rel_tol / 4), which GELU passes on
      // times |gelu'| <= 1.13; plus one ulp of the result for each path's
      // rounding (rel_tol).
      const double zf = fmt.widen(z[idx]);
      ASSERT_TRUE(test::close_enough(fmt.widen(fused.c[idx]), two_pass, fmt.rel_tol(),
                                     1.13 * std::fabs(zf) * fmt.rel_tol() / 4 + 6e-8))
          << i << "," << j << ": fused " << fmt.widen(fused.c[idx]) << " two-pass " << two_pass << " z " << zf;
      differ += fused.c[idx].bits != fmt.narrow(static_cast<float>(two_pass)).bits;
    }
  RecordProperty("differ_from_two_pass", static_cast<int>(differ));
}

TEST_P(GemmEpilogues, InvalidCombinationsAreRefused) {
  Buffer<lowp16> a(one, 4), b(one, 4), c(one, 4), z(one, 4);
  GemmLowp g;
  g.m = g.n = g.k = 2;
  g.a = a.data();
  g.lda = 2;
  g.b = b.data();
  g.ldb = 2;
  g.c = c.data();
  g.ldc = 2;
  g.act = Activation::Relu;
  g.dact = Activation::Relu;
  g.dact_input = z.data();
  g.ld_dact_input = 2;
  EXPECT_THROW(gemm_lowp(one, g), Error);  // act and dact together
  g.dact = Activation::None;
  g.beta = 1.0f;
  EXPECT_THROW(gemm_lowp(one, g), Error);  // an activation epilogue with beta
  g.act = Activation::None;
  g.beta = 0.0f;
  g.dact = Activation::Gelu;
  g.dact_input = nullptr;
  EXPECT_THROW(gemm_lowp(one, g), Error);  // no dact input
  g.dact_input = z.data();
  g.ld_dact_input = 1;
  EXPECT_THROW(gemm_lowp(one, g), Error);  // stride shorter than a row
}

INSTANTIATE_TEST_SUITE_P(Precisions, GemmEpilogues, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
