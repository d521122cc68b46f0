// test_gemm_simple_ops.cpp: cuda_gemm_simple.cu's CUDA-core GEMM, the
// fallback that implements the whole GemmLowp contract on its own (alpha,
// beta * C, bias, activation or its gradient, pre-activation output, one
// rounding), against the CPU GEMM (cpu_gemm_lowp: widened operands,
// cblas_sgemm, narrow_rows), FP16 and BF16 (op_test_support.h).
//
// Tolerances as tests/cuda/cuda_test_gemm_epilogues.cpp: both sum exact
// products in FP32 but in different orders (one fmaf after another here,
// the BLAS's blocking there), so two ulps of the format plus 1e-5 times
// sum|terms| (scaled by the largest |act'|), the bound on the FP32 error of
// GELU's slope where cdf + z pdf cancels, and one FP16 subnormal step;
// magnitudes from the double reference of support/gemm_epilogue_support.h.
// Everything outside the m x n window (padding, the prefix of an odd
// offset) must hold what it held, bit for bit.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/ops/op_test_support.h"
#include "support/gemm_epilogue_support.h"

namespace ddp::test {
namespace {

using GemmSimpleOps = OpTest;

constexpr double kFp16SubnormalStep = 6e-8;  // 2^-24

std::string case_text(const EpilogueCase& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " ta=" + (c.trans_a == Transpose::Yes ? "T" : "N") + " tb=" + (c.trans_b == Transpose::Yes ? "T" : "N") +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) + (c.bias ? " bias" : "") +
         " act=" + activation_name(c.act) + (c.pre_activation ? " pre-activation" : "") +
         " dact=" + activation_name(c.dact) + " pad=" + std::to_string(c.pad) + " offset=" + std::to_string(c.offset);
}

// One case on both sides, outputs poisoned (C holds c0: poison unless beta
// != 0, so a beta-0 GEMM that read C would give NaN).
void run_case(const LowpFormat& fmt, CpuThreadPool& pool, std::mt19937_64& rng, const EpilogueCase& c) {
  const std::string what = case_text(c);
  SCOPED_TRACE(what);
  const EpilogueInputs in = make_epilogue_inputs(rng, c, fmt);
  // The CPU.
  std::vector<lowp16> want_c = in.c0, want_pre = LowpFormat::poison(c.c_count());
  CpuGemmScratch scratch;
  cpu_gemm_lowp(fmt.precision,
                epilogue_gemm(c, in.a.data(), in.b.data(), in.bias.data(), in.dact_input.data(), want_c.data(),
                              want_pre.data(), nullptr),
                pool, scratch);
  // The device.
  auto upload = [](const std::vector<lowp16>& v) { return v.empty() ? std::vector<lowp16>(1) : v; };
  DeviceArray<lowp16> d_a(upload(in.a)), d_b(upload(in.b)), d_bias(upload(in.bias)), d_z(upload(in.dact_input)),
      d_c(upload(in.c0)), d_pre(upload(LowpFormat::poison(c.c_count())));
  launch_simple_gemm_lowp(
      fmt.precision, epilogue_gemm(c, d_a.get(), d_b.get(), d_bias.get(), d_z.get(), d_c.get(), d_pre.get(), nullptr),
      nullptr);
  std::vector<lowp16> got_c = d_c.download(), got_pre = d_pre.download();
  got_c.resize(c.c_count());
  got_pre.resize(c.c_count());
  // Floors in the window; outside it, bitwise.
  const EpilogueReference ref = epilogue_reference(c, in, fmt);
  std::vector<double> floor(c.c_count(), 0.0);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      const size_t at = static_cast<size_t>(i) * c.n + j;
      floor[c.c_index(i, j)] = 1e-5 * ref.c_magnitude[at] + ref.c_slope_error[at] + kFp16SubnormalStep;
    }
  std::vector<lowp16> got_rest, want_rest, got_pre_rest;
  for (size_t idx = 0; idx < c.c_count(); ++idx)
    if (idx < c.offset || static_cast<int>((idx - c.offset) % c.ldc()) >= c.n) {
      got_rest.push_back(got_c[idx]);
      want_rest.push_back(in.c0[idx]);
      got_pre_rest.push_back(got_pre[idx]);
    }
  expect_close_each(fmt, got_c, want_c, fmt.rel_tol(), floor, "C");
  expect_same_bits(fmt, got_rest, want_rest, "C outside the m x n window");
  if (c.pre_activation) {
    expect_close_each(fmt, got_pre, want_pre, fmt.rel_tol(), floor, "pre-activation");
    expect_same_bits(fmt, got_pre_rest, LowpFormat::poison(got_pre_rest.size()),
                     "pre-activation outside the m x n window");
  } else {
    expect_same_bits(fmt, got_pre, LowpFormat::poison(got_pre.size()), "no pre-activation: untouched");
  }
}

// Every transpose: one element; odd shapes inside one block of 32 x 8
// threads; shapes over 2 x 2 blocks with idle threads at the edges; a long
// sum. Each with alpha and padded rows, then a bias at an odd offset, then
// beta (C read), then bias and beta together (the residual add).
TEST_P(GemmSimpleOps, AllTransposesAlphaBetaBiasMatchTheCpu) {
  SCOPED_TRACE(seed_text());
  const int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {9, 40, 33}, {2, 3, 1031}};
  for (const auto& s : shapes)
    for (const Transpose ta : {Transpose::No, Transpose::Yes})
      for (const Transpose tb : {Transpose::No, Transpose::Yes}) {
        EpilogueCase c{s[0], s[1], s[2]};
        c.trans_a = ta;
        c.trans_b = tb;
        c.alpha = 0.75f;
        c.pad = 1;
        run_case(fmt, pool, rng, c);
        c.bias = true;
        c.offset = 1;
        run_case(fmt, pool, rng, c);
        c.bias = false;
        c.beta = -0.5f;
        run_case(fmt, pool, rng, c);
        c.bias = true;
        c.beta = 1.0f;
        c.alpha = 1.0f;
        run_case(fmt, pool, rng, c);
      }
}

// The element-wise epilogue in the kernel: ReLU and GELU (erf and tanh)
// with a bias, the pre-activation output kept or not, the gradients of all
// three (dact, Z read), over every transpose.
TEST_P(GemmSimpleOps, ActivationEpiloguesMatchTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const Transpose ta : {Transpose::No, Transpose::Yes})
    for (const Transpose tb : {Transpose::No, Transpose::Yes}) {
      EpilogueCase c{9, 40, 33};
      c.trans_a = ta;
      c.trans_b = tb;
      c.bias = true;
      c.act = Activation::Relu;
      c.alpha = 0.75f;
      run_case(fmt, pool, rng, c);
      c.pre_activation = true;
      run_case(fmt, pool, rng, c);
      c.act = Activation::Gelu;
      c.pad = 1;
      run_case(fmt, pool, rng, c);
      c.act = Activation::GeluTanh;
      c.offset = 1;
      run_case(fmt, pool, rng, c);
      c.pre_activation = false;
      run_case(fmt, pool, rng, c);
      c = EpilogueCase{9, 40, 33};
      c.trans_a = ta;
      c.trans_b = tb;
      c.alpha = -1.5f;
      for (const Activation dact : {Activation::Relu, Activation::Gelu, Activation::GeluTanh}) {
        c.dact = dact;
        c.bias = dact == Activation::Relu;
        run_case(fmt, pool, rng, c);
      }
    }
  // GELU's gradient where cdf + z pdf cancels.
  EpilogueCase near_zero{5, 33, 64};
  near_zero.z_near_gelu_prime_zero = true;
  for (const Activation dact : {Activation::Gelu, Activation::GeluTanh}) {
    near_zero.dact = dact;
    run_case(fmt, pool, rng, near_zero);
  }
}

// k = 0: C = epilogue(beta C + bias), no product; m = 0 and n = 0 launch
// nothing.
TEST_P(GemmSimpleOps, EmptySumsAndEmptyOutputs) {
  SCOPED_TRACE(seed_text());
  EpilogueCase zero_k{7, 9, 0};
  zero_k.pad = 1;  // lda >= 1
  zero_k.beta = 0.5f;
  run_case(fmt, pool, rng, zero_k);  // C = beta C
  zero_k.beta = 0.0f;
  zero_k.bias = true;
  zero_k.act = Activation::Gelu;
  zero_k.pre_activation = true;
  run_case(fmt, pool, rng, zero_k);  // C = gelu(bias)
  EpilogueCase empty_m{0, 5, 3};
  run_case(fmt, pool, rng, empty_m);
  EpilogueCase empty_n{4, 0, 3};
  empty_n.pad = 1;
  run_case(fmt, pool, rng, empty_n);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GemmSimpleOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
