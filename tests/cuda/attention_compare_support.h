// attention_compare_support.h (tests): the attention operations (strided
// batched GEMM, causal softmax forward/backward) on a reference backend and
// on the backend under test, as transformer_compare_support.h does for the
// rest (same harness, same callers: CPU against CUDA, and one CPU thread
// against two).
//
// Tolerances: batched GEMM as gemm_lowp (cuda_test_support.h: fmt.rel_tol()
// plus 1e-5 * sum|terms| + one subnormal step); the softmax forward
// fmt.rel_tol() plus one subnormal step (p <= 1, expf's last bits and the
// row sum's order); its backward from the same 16-bit probabilities,
// fmt.rel_tol() plus 2e-5 times the cancelling terms' magnitude. The
// decoder's attention against a cache (attention_decode_lowp): each score
// is an FMA chain over d on both sides (the same FP32 bits), the
// probabilities then differ as the softmax's do (an ulp of the format:
// 2^-11 of p at most in FP16, 2^-8 in BF16), which moves sum_j p_j v_j by
// at most that times max_j |v_j|: allowed fmt.rel_tol() max_j |v_j| (twice
// it) plus fmt.rel_tol() and a subnormal step.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops/attention_decode.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/gemm.h"
#include "transformer_compare_support.h"

namespace ddp::test {

// The per-head products of attention, [bh] batches: S = Q K^T (NT), Y = P V
// (NN), dP = dY V^T (NT), dV = P^T dY (TN), dQ = dS K (NN), dK = dS^T Q (TN),
// and every other transpose pair too; strides may leave gaps (kept) and be
// odd (2-byte aligned products).
inline void compare_batched_gemm(Backend& ref, Backend& dut, std::mt19937_64& rng, int bh, int m, int n, int k,
                                 Transpose ta, Transpose tb, float alpha, float beta, int64_t gap) {
  const LowpFormat fmt{dut.precision()};
  SCOPED_TRACE("batched bh=" + std::to_string(bh) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
               " k=" + std::to_string(k) + " ta=" + std::to_string(ta == Transpose::Yes) + " tb=" +
               std::to_string(tb == Transpose::Yes) + " beta=" + std::to_string(beta) + " gap=" + std::to_string(gap));
  const int64_t sa = static_cast<int64_t>(m) * k + gap, sb = static_cast<int64_t>(k) * n + gap,
                sc = static_cast<int64_t>(m) * n + gap;
  const auto a = fmt.random(rng, static_cast<size_t>(bh * sa)), b = fmt.random(rng, static_cast<size_t>(bh * sb));
  const auto c0 =
      beta != 0.0f ? fmt.random(rng, static_cast<size_t>(bh * sc)) : poison_halves(static_cast<size_t>(bh * sc));
  std::vector<lowp16> out[2];
  Backend* backends[2] = {&ref, &dut};
  for (int i = 0; i < 2; ++i) {
    auto da = upload_to(*backends[i], a), db = upload_to(*backends[i], b), dc = upload_to(*backends[i], c0);
    GemmBatchedLowp batched;
    GemmLowp& g = batched.gemm;
    g.trans_a = ta;
    g.trans_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.beta = beta;
    g.a = da.data();
    g.lda = ta == Transpose::Yes ? m : k;
    g.b = db.data();
    g.ldb = tb == Transpose::Yes ? k : n;
    g.c = dc.data();
    g.ldc = n;
    batched.batch_count = bh;
    batched.stride_a = sa;
    batched.stride_b = sb;
    batched.stride_c = sc;
    gemm_batched_lowp(*backends[i], batched);
    out[i] = dc.download();
  }
  // Per element sum|a b| (+ |beta c|): the scale of the FP32 summation error.
  std::vector<double> magnitude(out[0].size(), 0.0);
  for (int z = 0; z < bh; ++z)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = beta != 0.0f ? std::fabs(beta * fmt.widen(c0[z * sc + i * n + j])) : 0.0;
        for (int p = 0; p < k; ++p)
          s += std::fabs(fmt.widen(a[z * sa + (ta == Transpose::Yes ? p * m + i : i * k + p)]) *
                         fmt.widen(b[z * sb + (tb == Transpose::Yes ? j * k + p : p * n + j)]));
        magnitude[z * sc + i * n + j] = std::fabs(alpha) * s;
      }
  expect_close(
      fmt, out[1], out[0], fmt.rel_tol(), [&](size_t i) { return 1e-5 * magnitude[i] + kFp16SubnormalStep; },
      "batched product");
}

inline void compare_causal_softmax(Backend& ref, Backend& dut, std::mt19937_64& rng, int bh, int t, int head_size) {
  const LowpFormat fmt{dut.precision()};
  SCOPED_TRACE("causal softmax bh=" + std::to_string(bh) + " T=" + std::to_string(t));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_size));
  auto scores = fmt.random(rng, static_cast<size_t>(bh) * t * t, -10.0f, 10.0f);
  for (int z = 0; z < bh; ++z)  // masked entries that must not be read
    for (int i = 0; i < t; ++i)
      for (int j = i + 1; j < t; j += 2) scores[(static_cast<size_t>(z) * t + i) * t + j] = lowp16{fmt.nan_bits()};
  const auto dprobs = fmt.random(rng, scores.size());
  std::vector<lowp16> probs[2], dscores[2];
  Backend* backends[2] = {&ref, &dut};
  for (int k = 0; k < 2; ++k) {
    Backend& be = *backends[k];
    auto s = upload_to(be, scores), p = upload_to(be, poison_halves(scores.size()));
    CausalSoftmaxForward forward;
    forward.scores = s.data();
    forward.batch_heads = bh;
    forward.seq_len = t;
    forward.scale = scale;
    forward.probs = p.data();
    causal_softmax_forward_lowp(be, forward);
    probs[k] = p.download();
    // In place, as a caller short of memory would run it.
    forward.probs = s.data();
    causal_softmax_forward_lowp(be, forward);
    EXPECT_TRUE(same_bits(fmt, s.download(), probs[k])) << "in-place softmax differs";
    // Both backwards read the reference's probabilities.
    p.upload(probs[0]);
    auto dp = upload_to(be, dprobs), ds = upload_to(be, poison_halves(scores.size()));
    CausalSoftmaxBackward backward;
    backward.probs = p.data();
    backward.dprobs = dp.data();
    backward.batch_heads = bh;
    backward.seq_len = t;
    backward.scale = scale;
    backward.dscores = ds.data();
    causal_softmax_backward_lowp(be, backward);
    dscores[k] = ds.download();
    backward.dscores = dp.data();
    causal_softmax_backward_lowp(be, backward);  // in place
    EXPECT_TRUE(same_bits(fmt, dp.download(), dscores[k])) << "in-place softmax backward differs";
  }
  expect_close(fmt, probs[1], probs[0], fmt.rel_tol(), kFp16SubnormalStep, "probs");
  std::vector<double> magnitude(scores.size());
  for (int z = 0; z < bh; ++z) {
    const size_t base = static_cast<size_t>(z) * t * t;
    std::vector<double> p(t * t), dp(t * t), ds, mag;
    for (int i = 0; i < t * t; ++i) p[i] = fmt.widen(probs[0][base + i]), dp[i] = fmt.widen(dprobs[base + i]);
    causal_softmax_grad_reference(p, dp, t, scale, ds, mag);
    for (int i = 0; i < t * t; ++i) magnitude[base + i] = mag[i];
  }
  expect_close(
      fmt, dscores[1], dscores[0], fmt.rel_tol(), [&](size_t i) { return 2e-5 * magnitude[i] + kFp16SubnormalStep; },
      "dscores");
  size_t masked_nonzero = 0;
  for (int z = 0; z < bh; ++z)
    for (int i = 0; i < t; ++i)
      for (int j = i + 1; j < t; ++j) {
        const size_t at = (static_cast<size_t>(z) * t + i) * t + j;
        masked_nonzero += probs[1][at].bits != 0 || dscores[1][at].bits != 0;
      }
  EXPECT_EQ(masked_nonzero, 0u) << "masked positions must be exactly +0";
}

// Attention of new_len positions after past_len cached ones, as the
// decoder calls it: q read inside a qkv-like row (stride 3C + 1), caches with
// a row gap, the output's gap columns and every cache row past the visible
// ones NaN (never read, never written).
inline void compare_attention_decode(Backend& ref, Backend& dut, std::mt19937_64& rng, int heads, int head_size,
                                     int past_len, int new_len) {
  const LowpFormat fmt{dut.precision()};
  SCOPED_TRACE("attention decode nh=" + std::to_string(heads) + " hs=" + std::to_string(head_size) +
               " past=" + std::to_string(past_len) + " new=" + std::to_string(new_len));
  const int c = heads * head_size;
  const int q_stride = 3 * c + 1, kv_stride = c + 3, out_stride = c + 2;
  const int positions = past_len + new_len, capacity = positions + 4;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_size));
  const auto q = fmt.random(rng, static_cast<size_t>(new_len) * q_stride, -2.0f, 2.0f);
  auto k = fmt.random(rng, static_cast<size_t>(capacity) * kv_stride, -2.0f, 2.0f);
  auto v = fmt.random(rng, k.size());
  for (size_t i = static_cast<size_t>(positions) * kv_stride; i < k.size(); ++i) k[i] = v[i] = lowp16{fmt.nan_bits()};
  std::vector<lowp16> out[2];
  Backend* backends[2] = {&ref, &dut};
  for (int b = 0; b < 2; ++b) {
    Backend& be = *backends[b];
    auto dq = upload_to(be, q), dk = upload_to(be, k), dv = upload_to(be, v);
    auto dout = upload_to(be, poison_halves(static_cast<size_t>(new_len) * out_stride));
    AttentionDecode attention;
    attention.q = dq.data();
    attention.q_stride = q_stride;
    attention.k_cache = dk.data();
    attention.v_cache = dv.data();
    attention.kv_stride = kv_stride;
    attention.heads = heads;
    attention.head_size = head_size;
    attention.past_len = past_len;
    attention.new_len = new_len;
    attention.scale = scale;
    attention.out = dout.data();
    attention.out_stride = out_stride;
    attention_decode_lowp(be, attention);
    out[b] = dout.download();
  }
  const std::vector<lowp16> poison = poison_halves(out[0].size());
  std::vector<double> v_max(out[0].size(), 0.0);
  size_t gap_written = 0;
  for (int i = 0; i < new_len; ++i)
    for (int col = 0; col < out_stride; ++col) {
      const size_t at = static_cast<size_t>(i) * out_stride + col;
      if (col >= c) {
        gap_written += out[1][at].bits != poison[at].bits;
        // Checked here: the comparison below is of the written columns (the poison is a NaN on both sides).
        out[0][at] = lowp16{0};
        out[1][at] = lowp16{0};
        continue;
      }
      for (int j = 0; j <= past_len + i; ++j)
        v_max[at] = std::max(v_max[at], std::fabs(double{fmt.widen(v[static_cast<size_t>(j) * kv_stride + col])}));
    }
  EXPECT_EQ(gap_written, 0u) << "the output's columns past heads * head_size must stay as they were";
  expect_close(
      fmt, out[1], out[0], fmt.rel_tol(), [&](size_t i) { return fmt.rel_tol() * v_max[i] + kFp16SubnormalStep; },
      "attention decode");
}

}  // namespace ddp::test
