// test_cpu_flash_attention.cpp: CpuBackend's fused causal attention
// (attention_forward_fused_lowp, attention_backward_fused_lowp) against a
// double-precision reference and against the explicit FP16 path on the
// same fresh random inputs, outputs poisoned first
// (flash_attention_support.h: the runs, the reference and the tolerance);
// bitwise the same on one and two threads; and, disabled by default, its
// time against the explicit path's at a GPT-2 layer's shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/flash_attention.h"
#include "kernels/ops/gemm.h"
#include "kernels/error.h"
#include "support/flash_attention_support.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using namespace test;

class CpuFlashAttention : public ::testing::TestWithParam<Precision> {
 protected:
  CpuFlashAttention() : rng(test_seed()) {}
  std::string seed_text() const { return "seed " + std::to_string(test_seed()) + " (DDP_TEST_SEED reproduces)"; }
  LowpFormat fmt{GetParam()};
  std::mt19937_64 rng;
};

// The largest |a - b|: how far the op's own reference (D from the FP16 out)
// is from the true values, i.e. what rounding out for D alone costs.
double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// One tensor: `fused` (against the op's double reference) within the
// allowance; against the true values, `fused_true` no worse than
// `explicit_true` + 2^-11 M + d_rounding (the measured cost of D from the
// FP16 out, which the explicit path does not pay: its D is rowsum(P dP) of
// its own FP16 P and dP; at head sizes 1 and 3 that term alone exceeded the
// 2^-11 M margin for some seeds, at 17 and above it never did in 30 seeds
// tried).
void check_tensor(const LowpFormat& fmt, const char* what, const FlashError& fused, const FlashError& fused_true,
                  const FlashError& explicit_true, double d_rounding, const FlashShape& s, double cancellation = 0.0) {
  const double margin = kFlashExplicitMargin * fmt.rel_tol() / kFp16RelTol;  // 8x in BF16
  std::printf(
      "[ flash  ] %-16s %-3s fused %.3f of allowance (max abs %.2e, M %.3f); vs true: fused %.2e, "
      "explicit %.2e (D from FP16 out: %.2e)\n",
      s.text().c_str(), what, fused.worst_fraction, fused.max_abs, fused.max_ref, fused_true.max_abs,
      explicit_true.max_abs, d_rounding);
  EXPECT_LE(fused.worst_fraction, 1.0) << flash_error_text(what, fused);
  EXPECT_LE(fused_true.max_abs, explicit_true.max_abs + margin * fused_true.max_ref + d_rounding + cancellation)
      << what << ": fused max abs err " << fused_true.max_abs << " against the explicit path's "
      << explicit_true.max_abs << " (D from the FP16 out accounts for " << d_rounding << ")";
}

void check_against_references(const LowpFormat& fmt, Backend& be, std::mt19937_64& rng, const FlashShape& s) {
  SCOPED_TRACE(s.text());
  const FlashInputs in = random_flash_inputs(rng, s, fmt);
  const FlashOutputs fused = run_fused(be, in, s);
  const FlashOutputs explicit_path = run_explicit(be, in, s);
  // The true values; and the backward op's own reference, D from the out
  // it was given (flash_attention_support.h).
  const FlashReference exact = flash_reference(in, s), given = flash_reference(in, s, &fused.out);
  check_tensor(fmt, "out", flash_error(fused.out, exact.out, nullptr, fmt),
               flash_error(fused.out, exact.out, nullptr, fmt), flash_error(explicit_path.out, exact.out, nullptr, fmt),
               0.0, s);
  // dq and dk: within the FP32 cancellation floor of dS too (FlashReference).
  const auto largest = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  check_tensor(fmt, "dq", flash_error(fused.dq, given.dq, &given.dq_floor, fmt),
               flash_error(fused.dq, exact.dq, nullptr, fmt), flash_error(explicit_path.dq, exact.dq, nullptr, fmt),
               max_abs_difference(given.dq, exact.dq), s, largest(given.dq_floor));
  check_tensor(fmt, "dk", flash_error(fused.dk, given.dk, &given.dk_floor, fmt),
               flash_error(fused.dk, exact.dk, nullptr, fmt), flash_error(explicit_path.dk, exact.dk, nullptr, fmt),
               max_abs_difference(given.dk, exact.dk), s, largest(given.dk_floor));
  check_tensor(fmt, "dv", flash_error(fused.dv, given.dv, nullptr, fmt), flash_error(fused.dv, exact.dv, nullptr, fmt),
               flash_error(explicit_path.dv, exact.dv, nullptr, fmt), max_abs_difference(given.dv, exact.dv), s);
  for (size_t i = 0; i < exact.lse.size(); ++i)
    ASSERT_NEAR(fused.lse[i], exact.lse[i], kFlashLseTol * (1.0 + std::fabs(exact.lse[i]))) << "lse row " << i;
}

TEST_P(CpuFlashAttention, MatchesDoubleReferenceAndExplicitPathAtShortRows) {
  SCOPED_TRACE(seed_text());
  CpuBackend be(2, GetParam());
  // T = 1 (one visible key), 7 (inside one tile), 64 (one whole tile), 65
  // and 130 (a partial last tile: one row, two rows); odd head sizes.
  for (int T : {1, 7, 64, 65, 130})
    for (int hs : {1, 3, 17, 64, 80}) check_against_references(fmt, be, rng, {3, T, hs});
}

TEST_P(CpuFlashAttention, MatchesDoubleReferenceAndExplicitPathAtLongRows) {
  SCOPED_TRACE(seed_text());
  CpuBackend be(2, GetParam());
  // 16 tiles per row: the online softmax rescales many times. One head
  // keeps the double reference quick.
  for (int hs : {1, 17, 64, 80}) check_against_references(fmt, be, rng, {1, 1024, hs});
}

TEST_P(CpuFlashAttention, BitwiseTheSameOnOneAndTwoThreads) {
  SCOPED_TRACE(seed_text());
  CpuBackend one(1, GetParam()), two(2, GetParam());
  for (const FlashShape& s : {FlashShape{5, 130, 17}, FlashShape{3, 300, 64}}) {
    SCOPED_TRACE(s.text());
    const FlashInputs in = random_flash_inputs(rng, s, fmt);
    const FlashOutputs a = run_fused(one, in, s), b = run_fused(two, in, s);
    EXPECT_EQ(half_bits(a.out), half_bits(b.out));
    EXPECT_EQ(float_bits(a.lse), float_bits(b.lse));
    EXPECT_EQ(half_bits(a.dq), half_bits(b.dq));
    EXPECT_EQ(half_bits(a.dk), half_bits(b.dk));
    EXPECT_EQ(half_bits(a.dv), half_bits(b.dv));
  }
}

TEST_P(CpuFlashAttention, RefusesAHeadSizeOfZero) {
  CpuBackend be(1, GetParam());
  Buffer<lowp16> x(be, 4);
  Buffer<float> lse(be, 4);
  AttentionForwardFused forward;
  forward.q = x.data();
  forward.k = x.data();
  forward.v = x.data();
  forward.batch_heads = 1;
  forward.seq_len = 4;
  forward.head_size = 0;
  forward.scale = 1.0f;
  forward.out = x.data();
  forward.lse = lse.data();
  EXPECT_THROW(attention_forward_fused_lowp(be, forward), Error);
}

TEST(AttentionMemory, FusedKeepsOutAndLseOnlyExplicitKeepsTheProbabilities) {
  // GPT-2 small's layer at batch 2: 24 heads x 1024 positions x 64.
  EXPECT_EQ(attention_fused_saved_bytes(24, 1024, 64), 24u * 1024 * 64 * 2 + 24u * 1024 * 4);
  EXPECT_EQ(attention_explicit_probs_bytes(24, 1024), 24u * 1024 * 1024 * 2);
}

// Milliseconds of the fastest of `reps` runs of fn.
double best_ms(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

// Not a check: prints the fused path's time beside the explicit one's at
// bh = 24 (batch 2 x 12 heads), T = 1024, hs = 64 on 2 threads.
// ddp_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*FlashAttention*Timing*'
TEST_P(CpuFlashAttention, DISABLED_TimingFusedAgainstExplicit) {
  const FlashShape s{24, 1024, 64};
  CpuBackend be(2, GetParam());
  const FlashInputs in = random_flash_inputs(rng, s, fmt);
  const int T = s.T, hs = s.hs, z = s.bh;
  const int64_t th = static_cast<int64_t>(T) * hs, tt = static_cast<int64_t>(T) * T;
  Buffer<lowp16> q(be, s.elems()), k(be, s.elems()), v(be, s.elems()), dout(be, s.elems());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  dout.upload(in.dout);
  Buffer<lowp16> out(be, s.elems()), dq(be, s.elems()), dk(be, s.elems()), dv(be, s.elems());
  Buffer<float> lse(be, s.rows());
  Buffer<lowp16> probs(be, static_cast<size_t>(z) * T * T), d_scores(be, static_cast<size_t>(z) * T * T);
  const Transpose N = Transpose::No, Y = Transpose::Yes;
  const float scale = s.scale();
  AttentionForwardFused fused_forward;
  fused_forward.q = q.data();
  fused_forward.k = k.data();
  fused_forward.v = v.data();
  fused_forward.batch_heads = z;
  fused_forward.seq_len = T;
  fused_forward.head_size = hs;
  fused_forward.scale = scale;
  fused_forward.out = out.data();
  fused_forward.lse = lse.data();
  AttentionBackwardFused fused_backward;
  fused_backward.q = q.data();
  fused_backward.k = k.data();
  fused_backward.v = v.data();
  fused_backward.out = out.data();
  fused_backward.lse = lse.data();
  fused_backward.dout = dout.data();
  fused_backward.batch_heads = z;
  fused_backward.seq_len = T;
  fused_backward.head_size = hs;
  fused_backward.scale = scale;
  fused_backward.dq = dq.data();
  fused_backward.dk = dk.data();
  fused_backward.dv = dv.data();
  CausalSoftmaxForward softmax;
  softmax.scores = probs.data();
  softmax.batch_heads = z;
  softmax.seq_len = T;
  softmax.scale = scale;
  softmax.probs = probs.data();
  CausalSoftmaxBackward softmax_grad;
  softmax_grad.probs = probs.data();
  softmax_grad.dprobs = d_scores.data();
  softmax_grad.batch_heads = z;
  softmax_grad.seq_len = T;
  softmax_grad.scale = scale;
  softmax_grad.dscores = d_scores.data();
  GemmBatchedLowp scores_gemm;
  scores_gemm.gemm = flash_gemm(N, Y, T, T, hs, q.data(), hs, k.data(), hs, probs.data(), T);
  scores_gemm.batch_count = z;
  scores_gemm.stride_a = th;
  scores_gemm.stride_b = th;
  scores_gemm.stride_c = tt;
  GemmBatchedLowp out_gemm;
  out_gemm.gemm = flash_gemm(N, N, T, hs, T, probs.data(), T, v.data(), hs, out.data(), hs);
  out_gemm.batch_count = z;
  out_gemm.stride_a = tt;
  out_gemm.stride_b = th;
  out_gemm.stride_c = th;
  GemmBatchedLowp d_probs_gemm;
  d_probs_gemm.gemm = flash_gemm(N, Y, T, T, hs, dout.data(), hs, v.data(), hs, d_scores.data(), T);
  d_probs_gemm.batch_count = z;
  d_probs_gemm.stride_a = th;
  d_probs_gemm.stride_b = th;
  d_probs_gemm.stride_c = tt;
  GemmBatchedLowp dv_gemm;
  dv_gemm.gemm = flash_gemm(Y, N, T, hs, T, probs.data(), T, dout.data(), hs, dv.data(), hs);
  dv_gemm.batch_count = z;
  dv_gemm.stride_a = tt;
  dv_gemm.stride_b = th;
  dv_gemm.stride_c = th;
  GemmBatchedLowp dq_gemm;
  dq_gemm.gemm = flash_gemm(N, N, T, hs, T, d_scores.data(), T, k.data(), hs, dq.data(), hs);
  dq_gemm.batch_count = z;
  dq_gemm.stride_a = tt;
  dq_gemm.stride_b = th;
  dq_gemm.stride_c = th;
  GemmBatchedLowp dk_gemm;
  dk_gemm.gemm = flash_gemm(Y, N, T, hs, T, d_scores.data(), T, q.data(), hs, dk.data(), hs);
  dk_gemm.batch_count = z;
  dk_gemm.stride_a = tt;
  dk_gemm.stride_b = th;
  dk_gemm.stride_c = th;
  const int reps = 5;
  const double fused_fwd = best_ms(reps, [&] { attention_forward_fused_lowp(be, fused_forward); });
  const double fused_bwd = best_ms(reps, [&] { attention_backward_fused_lowp(be, fused_backward); });
  const double explicit_fwd = best_ms(reps, [&] {
    gemm_batched_lowp(be, scores_gemm);
    causal_softmax_forward_lowp(be, softmax);
    gemm_batched_lowp(be, out_gemm);
  });
  // The explicit backward reads the probabilities the forward left.
  const double explicit_bwd = best_ms(reps, [&] {
    gemm_batched_lowp(be, d_probs_gemm);
    gemm_batched_lowp(be, dv_gemm);
    causal_softmax_backward_lowp(be, softmax_grad);
    gemm_batched_lowp(be, dq_gemm);
    gemm_batched_lowp(be, dk_gemm);
  });
  std::printf(
      "[ timing ] %s, %d threads, best of %d: fused fwd %.1f ms, explicit fwd %.1f ms; "
      "fused bwd %.1f ms, explicit bwd %.1f ms\n",
      s.text().c_str(), be.threads(), reps, fused_fwd, explicit_fwd, fused_bwd, explicit_bwd);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CpuFlashAttention, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp
