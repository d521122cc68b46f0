// test_causal_softmax.cpp: the causal softmax (kernels/ops/
// causal_softmax.h), forward and backward: the CUDA rows (one warp per row)
// against the CPU rows, FP16 and BF16 (op_test_support.h), and the CPU
// row's forward against the double softmax of the same 16-bit scores
// (support/transformer_reference.h).
//
// Tolerances (tests/cuda/attention_compare_support.h's rules):
// - softmax forward: fmt.rel_tol() plus 2^-24 (p <= 1; the CPU's exp is
//   cpu_exp8.h's, a GPU's its own expf, and the row sums run in other
//   orders). Masked entries exactly +0 (their inputs NaN: never read).
// - softmax backward, from the same 16-bit probabilities: fmt.rel_tol()
//   plus the FP32 summation-order tolerance (at least 2e-5) times the
//   magnitude of the terms that cancel, plus 2^-24.
// - in place (probs == scores, dscores == dprobs): the kernel's own
//   out-of-place bits.
// - the CPU forward against double: fmt.rel_tol() (two ulps of the format)
//   plus 2^-24, as the rule above. The row computes each probability in
//   FP32 and rounds it once: the rounding is at most half an ulp of the
//   format; before it, the FP32 value is off by a few FP32 ulps per
//   operation (the scaled score, exp under an ulp, the inverse of the sum
//   and the product) plus the row sum's error, at most T * 2^-24 relative
//   (1.6e-5 at T = 260): under 2e-5 in all, far inside the remaining 1.5
//   ulps of either format (7e-4 in FP16). Probabilities below 2^-14 are
//   FP16 subnormals, rounded to a step of 2^-24 whatever their size: the
//   absolute floor.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"
#include "support/transformer_reference.h"

namespace ddp::test {
namespace {

class CausalSoftmax : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr double kSubnormalStep = 6e-8;  // 2^-24

struct SoftmaxShape {
  int batch_heads, seq_len;
  std::string text() const { return "bh=" + std::to_string(batch_heads) + " T=" + std::to_string(seq_len); }
};

// One row; rows inside a warp's 32 lanes and past them; rows past one
// block's 8 warps (bh * T not a multiple of 8); rows past 256 entries.
const SoftmaxShape kSoftmaxShapes[] = {{1, 1}, {3, 7}, {2, 33}, {1, 70}, {1, 260}};

CausalSoftmaxForward forward_op(const lowp16* scores, int batch_heads, int seq_len, float scale, lowp16* probs) {
  CausalSoftmaxForward op;
  op.scores = scores;
  op.batch_heads = batch_heads;
  op.seq_len = seq_len;
  op.scale = scale;
  op.probs = probs;
  return op;
}

CausalSoftmaxBackward backward_op(const lowp16* probs, const lowp16* dprobs, int batch_heads, int seq_len, float scale,
                                  lowp16* dscores) {
  CausalSoftmaxBackward op;
  op.probs = probs;
  op.dprobs = dprobs;
  op.batch_heads = batch_heads;
  op.seq_len = seq_len;
  op.scale = scale;
  op.dscores = dscores;
  return op;
}

// Scores in [-10, 10], masked entries NaN (never read).
std::vector<lowp16> masked_scores(const LowpFormat& fmt, std::mt19937_64& rng, const SoftmaxShape& s) {
  const int t = s.seq_len;
  std::vector<lowp16> scores = fmt.random(rng, static_cast<size_t>(s.batch_heads) * t * t, -10.0f, 10.0f);
  for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)  // masked entries: never read
    for (int j = static_cast<int>(r % t) + 1; j < t; ++j) scores[r * t + j] = lowp16{fmt.nan_bits()};
  return scores;
}

TEST_P(CausalSoftmax, ForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const SoftmaxShape s : kSoftmaxShapes) {
    SCOPED_TRACE("causal softmax forward " + s.text());
    const int t = s.seq_len;
    const size_t n = static_cast<size_t>(s.batch_heads) * t * t;
    const float scale = 1.0f / std::sqrt(64.0f);
    const std::vector<lowp16> scores = masked_scores(fmt, rng, s);
    std::vector<lowp16> want(n);
    causal_softmax_forward_lowp(cpu, forward_op(scores.data(), s.batch_heads, t, scale, want.data()));
    DeviceArray<lowp16> d_scores(scores), d_probs(LowpFormat::poison(n));
    causal_softmax_forward_lowp_cuda(cuda, forward_op(d_scores.get(), s.batch_heads, t, scale, d_probs.get()));
    const std::vector<lowp16> probs = d_probs.download();
    expect_close(fmt, probs, want, fmt.rel_tol(), kSubnormalStep, "probs");
    size_t masked_nonzero = 0;
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) masked_nonzero += probs[r * t + j].bits != 0;
    EXPECT_EQ(masked_nonzero, 0u) << "masked probabilities must be exactly +0";
    causal_softmax_forward_lowp_cuda(cuda,
                                     forward_op(d_scores.get(), s.batch_heads, t, scale, d_scores.get()));  // in place
    expect_same_bits(fmt, d_scores.download(), probs, "probs in place");
  }
}

// The CPU row (the reference of the CUDA row's checks) against the double
// softmax of each [T, T] matrix, row by row; the rule in the file comment.
TEST_P(CausalSoftmax, CpuForwardMatchesDouble) {
  SCOPED_TRACE(seed_text());
  for (const SoftmaxShape s : kSoftmaxShapes) {
    SCOPED_TRACE("causal softmax forward in double " + s.text());
    const int t = s.seq_len;
    const size_t n = static_cast<size_t>(s.batch_heads) * t * t, matrix = static_cast<size_t>(t) * t;
    const float scale = 1.0f / std::sqrt(64.0f);
    const std::vector<lowp16> scores = masked_scores(fmt, rng, s);
    std::vector<lowp16> probs = LowpFormat::poison(n);
    causal_softmax_forward_lowp(cpu, forward_op(scores.data(), s.batch_heads, t, scale, probs.data()));
    int reported = 0;
    for (int z = 0; z < s.batch_heads; ++z) {
      const size_t base = static_cast<size_t>(z) * matrix;
      std::vector<double> sd(matrix);  // masked entries NaN: the reference reads j <= i only
      for (size_t i = 0; i < matrix; ++i) sd[i] = fmt.widen(scores[base + i]);
      const std::vector<double> ref = causal_softmax_reference(sd, t, scale);  // masked: exactly 0
      for (size_t i = 0; i < matrix && reported < 5; ++i) {
        const double got = fmt.widen(probs[base + i]);
        if (!(std::fabs(got - ref[i]) <= fmt.rel_tol() * ref[i] + kSubnormalStep)) {  // NaN fails
          ADD_FAILURE() << "probs[" << z << ", " << i / t << ", " << i % t << "]: got " << got << ", want " << ref[i];
          ++reported;
        }
      }
    }
  }
}

TEST_P(CausalSoftmax, BackwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const SoftmaxShape s : kSoftmaxShapes) {
    SCOPED_TRACE("causal softmax backward " + s.text());
    const int t = s.seq_len;
    const size_t n = static_cast<size_t>(s.batch_heads) * t * t;
    const float scale = 1.0f / std::sqrt(24.0f);
    // The probabilities of a forward (the CPU's), masked entries +0; dprobs
    // NaN where masked (never read).
    const std::vector<lowp16> scores = fmt.random(rng, n, -6.0f, 6.0f);
    std::vector<lowp16> probs(n);
    causal_softmax_forward_lowp(cpu, forward_op(scores.data(), s.batch_heads, t, scale, probs.data()));
    std::vector<lowp16> dprobs = fmt.random(rng, n);
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) dprobs[r * t + j] = lowp16{fmt.nan_bits()};
    std::vector<lowp16> want(n);
    causal_softmax_backward_lowp(cpu, backward_op(probs.data(), dprobs.data(), s.batch_heads, t, scale, want.data()));
    DeviceArray<lowp16> d_probs(probs), d_dprobs(dprobs), d_dscores(LowpFormat::poison(n));
    causal_softmax_backward_lowp_cuda(
        cuda, backward_op(d_probs.get(), d_dprobs.get(), s.batch_heads, t, scale, d_dscores.get()));
    const std::vector<lowp16> dscores = d_dscores.download();
    std::vector<double> magnitude(n);
    for (int z = 0; z < s.batch_heads; ++z) {
      const size_t base = static_cast<size_t>(z) * t * t;
      std::vector<double> p(static_cast<size_t>(t) * t), dp(p.size()), ds, mag;
      for (size_t i = 0; i < p.size(); ++i) {
        p[i] = fmt.widen(probs[base + i]);
        dp[i] = std::isnan(fmt.widen(dprobs[base + i])) ? 0.0 : fmt.widen(dprobs[base + i]);
      }
      causal_softmax_grad_reference(p, dp, t, scale, ds, mag);
      std::copy(mag.begin(), mag.end(), magnitude.begin() + static_cast<std::ptrdiff_t>(base));
    }
    const double order = std::max(2e-5, fp32_order_rel_tol(static_cast<size_t>(t)));
    std::vector<double> floor(n);
    for (size_t i = 0; i < n; ++i) floor[i] = order * magnitude[i] + kSubnormalStep;
    expect_close_each(fmt, dscores, want, fmt.rel_tol(), floor, "dscores");
    size_t masked_nonzero = 0;
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) masked_nonzero += dscores[r * t + j].bits != 0;
    EXPECT_EQ(masked_nonzero, 0u) << "masked score gradients must be exactly +0";
    causal_softmax_backward_lowp_cuda(
        cuda, backward_op(d_probs.get(), d_dprobs.get(), s.batch_heads, t, scale, d_dprobs.get()));  // in place
    expect_same_bits(fmt, d_dprobs.download(), dscores, "dscores in place");
  }
}

TEST_P(CausalSoftmax, NoRowsWriteNothingAndNegativeShapesAreRefused) {
  DeviceArray<lowp16> d(LowpFormat::poison(4));
  causal_softmax_forward_lowp_cuda(cuda, forward_op(d.get(), 0, 2, 1.0f, d.get()));
  causal_softmax_backward_lowp_cuda(cuda, backward_op(d.get(), d.get(), 3, 0, 1.0f, d.get()));
  for (const lowp16 x : d.download()) EXPECT_EQ(x.bits, kPoisonHalfBits);
  EXPECT_THROW(causal_softmax_forward_lowp_cuda(cuda, forward_op(d.get(), -1, 2, 1.0f, d.get())), Error);
  EXPECT_THROW(causal_softmax_backward_lowp_cuda(cuda, backward_op(d.get(), d.get(), 1, -2, 1.0f, d.get())), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CausalSoftmax, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
