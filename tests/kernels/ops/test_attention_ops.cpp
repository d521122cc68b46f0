// test_attention_ops.cpp: cuda_attention.cu's causal softmax (forward and
// backward, one warp per row) and cuda_attention_decode.cu's attention of new
// positions against cached keys and values, against the CPU loops
// (kernels/cpu/cpu_transformer.h), FP16 and BF16 (op_test_support.h).
//
// Tolerances (tests/cuda/attention_compare_support.h's rules):
// - softmax forward: fmt.rel_tol() plus 2^-24 (p <= 1; the CPU's exp is
//   cpu_exp8.h's, a GPU's its own expf, and the row sums run in other
//   orders). Masked entries exactly +0 (their inputs NaN: never read).
// - softmax backward, from the same 16-bit probabilities: fmt.rel_tol()
//   plus the FP32 summation-order tolerance (at least 2e-5) times the
//   magnitude of the terms that cancel, plus 2^-24.
// - decode: the scores are the same FMA chains on both sides, the rounded
//   probabilities may differ by an ulp of the format, which moves
//   sum_j p_j v_j by at most fmt.rel_tol() max_j |v_j|: that, plus
//   fmt.rel_tol() relative and 2^-24.
// - in place (probs == scores, dscores == dprobs): the kernel's own
//   out-of-place bits.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cuda/cuda_transformer.h"
#include "kernels/error.h"
#include "kernels/ops/op_test_support.h"
#include "support/transformer_reference.h"

namespace ddp::test {
namespace {

using AttentionOps = OpTest;

constexpr double kSubnormalStep = 6e-8;  // 2^-24

// expect_close with a floor per element, on 16-bit words.
void expect_close_each(const LowpFormat& fmt, const std::vector<lowp16>& got16, const std::vector<lowp16>& want16,
                       double rel, const std::function<double(size_t)>& abs_floor, const std::string& what) {
  const std::vector<float> got = fmt.widened(got16), want = fmt.widened(want16);
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

struct SoftmaxShape {
  int batch_heads, seq_len;
  std::string text() const { return "bh=" + std::to_string(batch_heads) + " T=" + std::to_string(seq_len); }
};

// One row; rows inside a warp's 32 lanes and past them; rows past one
// block's 8 warps (bh * T not a multiple of 8); rows past 256 entries.
const SoftmaxShape kSoftmaxShapes[] = {{1, 1}, {3, 7}, {2, 33}, {1, 70}, {1, 260}};

TEST_P(AttentionOps, CausalSoftmaxForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const SoftmaxShape s : kSoftmaxShapes) {
    SCOPED_TRACE("causal softmax forward " + s.text());
    const int t = s.seq_len;
    const size_t n = static_cast<size_t>(s.batch_heads) * t * t;
    const float scale = 1.0f / std::sqrt(64.0f);
    std::vector<lowp16> scores = fmt.random(rng, n, -10.0f, 10.0f);
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)  // masked entries: never read
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) scores[r * t + j] = lowp16{fmt.nan_bits()};
    std::vector<lowp16> want(n);
    cpu::causal_softmax_forward(precision(), pool, scores.data(), s.batch_heads, t, scale, want.data());
    DeviceArray<lowp16> d_scores(scores), d_probs(LowpFormat::poison(n));
    launch_causal_softmax_forward_lowp(nullptr, precision(), d_scores.get(), s.batch_heads, t, scale, d_probs.get());
    const std::vector<lowp16> probs = d_probs.download();
    expect_close(fmt, probs, want, fmt.rel_tol(), kSubnormalStep, "probs");
    size_t masked_nonzero = 0;
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) masked_nonzero += probs[r * t + j].bits != 0;
    EXPECT_EQ(masked_nonzero, 0u) << "masked probabilities must be exactly +0";
    launch_causal_softmax_forward_lowp(nullptr, precision(), d_scores.get(), s.batch_heads, t, scale,
                                       d_scores.get());  // in place
    expect_same_bits(fmt, d_scores.download(), probs, "probs in place");
  }
}

TEST_P(AttentionOps, CausalSoftmaxBackwardMatchesTheCpu) {
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
    cpu::causal_softmax_forward(precision(), pool, scores.data(), s.batch_heads, t, scale, probs.data());
    std::vector<lowp16> dprobs = fmt.random(rng, n);
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) dprobs[r * t + j] = lowp16{fmt.nan_bits()};
    std::vector<lowp16> want(n);
    cpu::causal_softmax_backward(precision(), pool, probs.data(), dprobs.data(), s.batch_heads, t, scale, want.data());
    DeviceArray<lowp16> d_probs(probs), d_dprobs(dprobs), d_dscores(LowpFormat::poison(n));
    launch_causal_softmax_backward_lowp(nullptr, precision(), d_probs.get(), d_dprobs.get(), s.batch_heads, t, scale,
                                        d_dscores.get());
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
    expect_close_each(
        fmt, dscores, want, fmt.rel_tol(), [&](size_t i) { return order * magnitude[i] + kSubnormalStep; }, "dscores");
    size_t masked_nonzero = 0;
    for (size_t r = 0; r < static_cast<size_t>(s.batch_heads) * t; ++r)
      for (int j = static_cast<int>(r % t) + 1; j < t; ++j) masked_nonzero += dscores[r * t + j].bits != 0;
    EXPECT_EQ(masked_nonzero, 0u) << "masked score gradients must be exactly +0";
    launch_causal_softmax_backward_lowp(nullptr, precision(), d_probs.get(), d_dprobs.get(), s.batch_heads, t, scale,
                                        d_dprobs.get());  // in place
    expect_same_bits(fmt, d_dprobs.download(), dscores, "dscores in place");
  }
}

TEST_P(AttentionOps, CausalSoftmaxWithNoRowsWritesNothingAndNegativeShapesAreRefused) {
  DeviceArray<lowp16> d(LowpFormat::poison(4));
  launch_causal_softmax_forward_lowp(nullptr, precision(), d.get(), 0, 2, 1.0f, d.get());
  launch_causal_softmax_backward_lowp(nullptr, precision(), d.get(), d.get(), 3, 0, 1.0f, d.get());
  for (const lowp16 x : d.download()) EXPECT_EQ(x.bits, kPoisonHalfBits);
  EXPECT_THROW(launch_causal_softmax_forward_lowp(nullptr, precision(), d.get(), -1, 2, 1.0f, d.get()), Error);
  EXPECT_THROW(launch_causal_softmax_backward_lowp(nullptr, precision(), d.get(), d.get(), 1, -2, 1.0f, d.get()),
               Error);
}

struct DecodeShape {
  int heads, head_size, past_len, new_len;
  std::string text() const {
    return "nh=" + std::to_string(heads) + " hs=" + std::to_string(head_size) + " past=" + std::to_string(past_len) +
           " new=" + std::to_string(new_len);
  }
};

// As the decoder calls it (attention_compare_support.h): q inside a
// qkv-like row (stride 3C + 1), caches with a row gap, the output's gap
// columns poisoned and left so, cache rows past the visible ones NaN (never
// read). Shapes: one position of head size 1; visible lengths inside a
// warp, past 32 and past 256 (a lane's several scores); head sizes past 32
// (a lane's several outputs), odd.
TEST_P(AttentionOps, DecodeMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const DecodeShape s : {DecodeShape{1, 1, 0, 1}, DecodeShape{3, 17, 5, 2}, DecodeShape{2, 33, 40, 3},
                              DecodeShape{1, 8, 290, 1}, DecodeShape{2, 70, 0, 4}}) {
    SCOPED_TRACE("attention decode " + s.text());
    const int c = s.heads * s.head_size;
    const int q_stride = 3 * c + 1, kv_stride = c + 3, out_stride = c + 2;
    const int positions = s.past_len + s.new_len, capacity = positions + 4;
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_size));
    const std::vector<lowp16> q = fmt.random(rng, static_cast<size_t>(s.new_len) * q_stride, -2.0f, 2.0f);
    std::vector<lowp16> k = fmt.random(rng, static_cast<size_t>(capacity) * kv_stride, -2.0f, 2.0f);
    std::vector<lowp16> v = fmt.random(rng, k.size());
    for (size_t i = static_cast<size_t>(positions) * kv_stride; i < k.size(); ++i) k[i] = v[i] = lowp16{fmt.nan_bits()};
    const size_t out_count = static_cast<size_t>(s.new_len) * out_stride;
    std::vector<lowp16> want = LowpFormat::poison(out_count);
    cpu::attention_decode(precision(), pool, q.data(), q_stride, k.data(), v.data(), kv_stride, s.heads, s.head_size,
                          s.past_len, s.new_len, scale, want.data(), out_stride);
    DeviceArray<lowp16> d_q(q), d_k(k), d_v(v), d_out(LowpFormat::poison(out_count));
    launch_attention_decode_lowp(nullptr, precision(), d_q.get(), q_stride, d_k.get(), d_v.get(), kv_stride, s.heads,
                                 s.head_size, s.past_len, s.new_len, scale, d_out.get(), out_stride);
    std::vector<lowp16> got = d_out.download();
    std::vector<double> v_max(out_count, 0.0);
    size_t gap_written = 0;
    for (int i = 0; i < s.new_len; ++i)
      for (int col = 0; col < out_stride; ++col) {
        const size_t at = static_cast<size_t>(i) * out_stride + col;
        if (col >= c) {
          gap_written += got[at].bits != kPoisonHalfBits;
          got[at] = want[at] = lowp16{0};  // compared above
          continue;
        }
        for (int j = 0; j <= s.past_len + i; ++j)
          v_max[at] = std::max(v_max[at], std::fabs(double{fmt.widen(v[static_cast<size_t>(j) * kv_stride + col])}));
      }
    EXPECT_EQ(gap_written, 0u) << "the output's columns past heads * head_size must stay as they were";
    expect_close_each(
        fmt, got, want, fmt.rel_tol(), [&](size_t i) { return fmt.rel_tol() * v_max[i] + kSubnormalStep; },
        "attention decode");
  }
}

// More positions than a block's 48 KB of FP32 scores: refused before any
// launch; strides narrower than the heads too.
TEST_P(AttentionOps, DecodeRefusesMorePositionsThanSharedMemoryHolds) {
  DeviceArray<lowp16> d(LowpFormat::poison(8));
  const int max_positions = attention_decode_max_positions();
  try {
    launch_attention_decode_lowp(nullptr, precision(), d.get(), 1, d.get(), d.get(), 1, 1, 1, max_positions, 1, 1.0f,
                                 d.get(), 1);
    FAIL() << max_positions + 1 << " positions were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      launch_attention_decode_lowp(nullptr, precision(), d.get(), 1, d.get(), d.get(), 2, 1, 2, 0, 1, 1.0f, d.get(), 2),
      Error);
  for (const lowp16 x : d.download()) EXPECT_EQ(x.bits, kPoisonHalfBits);
}

INSTANTIATE_TEST_SUITE_P(Precisions, AttentionOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
