// cuda_test_flash_attention.cpp: CudaBackend's fused causal attention
// against CpuBackend's (itself checked against a double reference in
// tests/kernels/cpu/test_cpu_flash_attention.cpp) on the same fresh random
// inputs, outputs poisoned first (flash_attention_support.h), at T = 1, 7,
// 64, 1024 and odd head sizes; bitwise the same run to run; head sizes
// past kFlashCudaMaxHeadSize refused. Skips where no GPU is visible; the
// harness itself runs without one, one CPU thread against two.
//
// Tolerance, CUDA against CPU, per tensor X with M = max |X_cpu|:
//   |cuda - cpu| <= fmt.rel_tol() * |cpu| + 2^-10 * M
// Both compute in FP32 and round once; they differ in the order of the
// sums (FMA chains per lane against OpenBLAS's blocking), in expf against
// the CPU's 8-lane exp (a few FP32 ulps), and in FMA contraction, which
// moves an output by at most an FP16 ulp or two plus the cancellation
// floor the double-reference check allows too. Each side is also held to
// the double reference with that rule. lse: 1e-5 * (1 + |lse|).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/error.h"
#include "kernels/ops/flash_attention.h"
#include "support/flash_attention_support.h"

namespace ddp {
namespace {

using namespace test;

// floor: dq's and dk's FP32 cancellation floor (FlashReference), for both
// sides' roundings of dS.
void expect_close(const LowpFormat& fmt, const char* what, const std::vector<lowp16>& dut,
                  const std::vector<lowp16>& ref_backend, const std::vector<double>& exact,
                  const std::vector<double>* floor = nullptr) {
  std::vector<double> both_sides;
  if (floor) {
    both_sides = *floor;
    for (double& f : both_sides) f *= 2;
  }
  const FlashError vs_ref = flash_error(dut, fmt.widened_doubles(ref_backend), floor ? &both_sides : nullptr, fmt);
  EXPECT_LE(vs_ref.worst_fraction, 1.0) << "against the reference backend: " << flash_error_text(what, vs_ref);
  const FlashError vs_exact = flash_error(dut, exact, floor, fmt);
  EXPECT_LE(vs_exact.worst_fraction, 1.0) << "against double: " << flash_error_text(what, vs_exact);
}

// The fused ops on `dut` against the same ops on `ref` (and both against
// double, the reference's own check repeated so a failure says which
// side). Both backwards start from the reference's out and lse, so they
// differ only by the backward kernels (a one-ulp difference in out moves D).
void compare_fused_attention(Backend& ref, Backend& dut, std::mt19937_64& rng, const FlashShape& s) {
  SCOPED_TRACE(s.text());
  const LowpFormat fmt{dut.precision()};
  const FlashInputs in = random_flash_inputs(rng, s, fmt);
  const FlashOutputs want = run_fused(ref, in, s);
  FlashOutputs got;
  run_fused_forward(dut, in, s, got);
  run_fused_backward(dut, in, s, want.out, want.lse, got);
  const FlashReference exact = flash_reference(in, s), given = flash_reference(in, s, &want.out);
  expect_close(fmt, "out", got.out, want.out, exact.out);
  expect_close(fmt, "dq", got.dq, want.dq, given.dq, &given.dq_floor);
  expect_close(fmt, "dk", got.dk, want.dk, given.dk, &given.dk_floor);
  expect_close(fmt, "dv", got.dv, want.dv, given.dv);
  for (size_t i = 0; i < want.lse.size(); ++i)
    ASSERT_NEAR(got.lse[i], want.lse[i], kFlashLseTol * (1.0 + std::fabs(want.lse[i]))) << "lse row " << i;
}

void compare_all_fused_shapes(Backend& ref, Backend& dut, std::mt19937_64& rng) {
  // T = 1, 7 (inside a tile), 64 (two CUDA tiles, one CPU tile), 1024 (many
  // rescalings); 33 and 100: partial last tiles on both sides.
  for (int T : {1, 7, 33, 64, 100})
    for (int hs : {1, 3, 17, 64, 80, 128}) compare_fused_attention(ref, dut, rng, {3, T, hs});
  for (int hs : {17, 64, 128}) compare_fused_attention(ref, dut, rng, {1, 1024, hs});
}

TEST_P(CudaLowpKernels, FusedAttentionMatchesCpu) {
  SCOPED_TRACE(seed_text());
  compare_all_fused_shapes(cpu, *gpu, rng);
}

TEST_P(CudaLowpKernels, FusedAttentionIsBitwiseTheSameRunToRun) {
  SCOPED_TRACE(seed_text());
  const FlashShape s{4, 300, 64};
  const FlashInputs in = random_flash_inputs(rng, s, fmt);
  const FlashOutputs a = run_fused(*gpu, in, s), b = run_fused(*gpu, in, s);
  EXPECT_EQ(half_bits(a.out), half_bits(b.out));
  EXPECT_EQ(float_bits(a.lse), float_bits(b.lse));
  EXPECT_EQ(half_bits(a.dq), half_bits(b.dq));
  EXPECT_EQ(half_bits(a.dk), half_bits(b.dk));
  EXPECT_EQ(half_bits(a.dv), half_bits(b.dv));
}

TEST_F(CudaKernels, FusedAttentionRefusesHeadSizesPastTheKernelsLimit) {
  const int hs = kFlashCudaMaxHeadSize + 1, T = 4;
  Buffer<lowp16> x(*gpu, static_cast<size_t>(T) * hs);
  Buffer<float> lse(*gpu, T);
  AttentionForwardFused forward;
  forward.q = x.data();
  forward.k = x.data();
  forward.v = x.data();
  forward.batch_heads = 1;
  forward.seq_len = T;
  forward.head_size = hs;
  forward.scale = 1.0f;
  forward.out = x.data();
  forward.lse = lse.data();
  try {
    attention_forward_fused_lowp(*gpu, forward);
    FAIL() << "head_size " << hs << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kFlashCudaMaxHeadSize"), std::string::npos) << e.what();
  }
}

class CudaFlashAttentionHarness : public ::testing::TestWithParam<Precision> {};

TEST_P(CudaFlashAttentionHarness, PassesCpuAgainstCpuWithOtherThreadCount) {
  // Runs without a GPU: the comparisons above with a two-thread CpuBackend
  // in the GPU's place.
  SCOPED_TRACE(seed_text());
  CpuBackend one(1, GetParam()), two(2, GetParam());
  std::mt19937_64 rng(test_seed());
  compare_all_fused_shapes(one, two, rng);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaFlashAttentionHarness, ::testing::ValuesIn(kBothPrecisions),
                         precision_test_name);

}  // namespace
}  // namespace ddp
