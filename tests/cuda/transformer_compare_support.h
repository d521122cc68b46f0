// transformer_compare_support.h (tests): the GPT operations run on a
// reference backend and on the backend under test with the same fresh random
// inputs, outputs poisoned first, and compared with the tolerances below. The
// suites call these with CpuBackend against CudaBackend
// (cuda_test_transformer_kernels.cpp, where a GPU is visible) and with a
// one-thread against a two-thread CpuBackend (always), so a bug in the
// harness shows without a GPU.
//
// Tolerances (cuda_test_support.h states the general rules):
// - embedding forward, residual add, head permutes: one FP32 add of two 16-bit
//   values or a copy: bitwise equal.
// - embedding backward: both backends add each token's rows in increasing
//   row order (CUDA after a stable sort): bitwise equal.
// - LayerNorm, causal softmax: FP32 row/column sums in different orders,
//   FMA contraction on CUDA, expf/sqrtf last bits: fmt.rel_tol() relative plus
//   2e-5 times the magnitude of the terms that cancel (transformer_reference.h
//   gives it per element) plus 2^-24 (FP16's subnormal step, a floor in both formats); mean/rstd
//   fp32_sum_rel_tol(cols).
// - Every operation: the backend under test gives the same bits twice.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/head_layout.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/softmax_xent.h"
#include "support/transformer_reference.h"

namespace ddp::test {

template <class T>
Buffer<T> upload_to(Backend& be, const std::vector<T>& host) {
  Buffer<T> b(be, host.size());
  b.upload(host);
  return b;
}

inline bool same_bits(const LowpFormat& fmt, const std::vector<lowp16>& a, const std::vector<lowp16>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_half(fmt, a[i], b[i])) return false;
  return true;
}

inline void compare_embeddings(Backend& ref, Backend& dut, std::mt19937_64& rng, int B, int T, int C, int V) {
  const LowpFormat fmt{dut.precision()};
  SCOPED_TRACE("embedding B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
               " V=" + std::to_string(V));
  auto tokens = random_labels(rng, static_cast<size_t>(B) * T, V);
  // A frequent token (a long run after the sort) and one out of range.
  for (size_t r = 0; r < tokens.size(); r += 3) tokens[r] = 1 % V;
  tokens.back() = V + 5;
  const auto wte = fmt.random(rng, static_cast<size_t>(V) * C), wpe = fmt.random(rng, static_cast<size_t>(T) * C);
  const auto dout = fmt.random(rng, tokens.size() * C), prev = fmt.random(rng, wte.size()),
             prev_pos = fmt.random(rng, wpe.size());
  std::vector<lowp16> out[2], grads[2][2][2];  // [backend][accumulate][wte, wpe]
  Backend* backends[2] = {&ref, &dut};
  for (int k = 0; k < 2; ++k) {
    Backend& be = *backends[k];
    auto d_tok = upload_to(be, tokens);
    auto d_wte = upload_to(be, wte), d_wpe = upload_to(be, wpe), d_dout = upload_to(be, dout);
    auto d_out = upload_to(be, poison_halves(dout.size()));
    EmbeddingForward forward;
    forward.tokens = d_tok.data();
    forward.wte = d_wte.data();
    forward.wpe = d_wpe.data();
    forward.batch = B;
    forward.seq_len = T;
    forward.channels = C;
    forward.vocab = V;
    forward.out = d_out.data();
    embedding_forward_lowp(be, forward);
    out[k] = d_out.download();
    EmbeddingBackward backward;
    backward.tokens = d_tok.data();
    backward.dout = d_dout.data();
    backward.batch = B;
    backward.seq_len = T;
    backward.channels = C;
    backward.vocab = V;
    for (int acc = 0; acc < 2; ++acc) {
      auto g_wte = upload_to(be, acc ? prev : poison_halves(wte.size()));
      auto g_wpe = upload_to(be, acc ? prev_pos : poison_halves(wpe.size()));
      backward.d_wte = g_wte.data();
      backward.d_wpe = g_wpe.data();
      backward.accumulate = acc != 0;
      embedding_backward_lowp(be, backward);
      grads[k][acc][0] = g_wte.download();
      grads[k][acc][1] = g_wpe.download();
      if (k == 1) {  // run to run
        auto again = upload_to(be, acc ? prev : poison_halves(wte.size()));
        backward.d_wte = again.data();
        embedding_backward_lowp(be, backward);
        EXPECT_TRUE(same_bits(fmt, again.download(), grads[k][acc][0])) << "d_wte differs run to run";
      }
    }
  }
  expect_halves_equal(fmt, out[1], out[0], "embedding forward");
  for (int acc = 0; acc < 2; ++acc) {
    expect_halves_equal(fmt, grads[1][acc][0], grads[0][acc][0], acc ? "d_wte accumulate" : "d_wte");
    expect_halves_equal(fmt, grads[1][acc][1], grads[0][acc][1], acc ? "d_wpe accumulate" : "d_wpe");
  }
}

inline void compare_layernorm(Backend& ref, Backend& dut, std::mt19937_64& rng, int rows, int cols) {
  const LowpFormat fmt{dut.precision()};
  SCOPED_TRACE("layernorm rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
  std::vector<lowp16> x;
  std::uniform_real_distribution<float> offset(-3.0f, 3.0f), spread(0.1f, 4.0f);
  for (int r = 0; r < rows; ++r) {
    const float o = offset(rng), s = spread(rng);
    for (const lowp16 h : fmt.random(rng, cols)) x.push_back(fmt.narrow(o + s * fmt.widen(h)));
  }
  const auto gamma = fmt.random(rng, cols, 0.5f, 1.5f), beta = fmt.random(rng, cols, -0.5f, 0.5f);
  const auto dy = fmt.random(rng, x.size()), prev_dx = fmt.random(rng, x.size()), prev_p = fmt.random(rng, cols);
  const auto grad_ref = layernorm_grad_reference(fmt.widened_doubles(dy), fmt.widened_doubles(x),
                                                 fmt.widened_doubles(gamma), rows, cols, 1e-5);
  const auto fwd_ref = layernorm_reference(fmt.widened_doubles(x), fmt.widened_doubles(gamma),
                                           fmt.widened_doubles(beta), rows, cols, 1e-5);
  struct Out {
    std::vector<lowp16> y, dx[2], dgamma[2], dbeta[2];
    std::vector<float> mean, rstd;
  } o[2];
  Backend* backends[2] = {&ref, &dut};
  for (int k = 0; k < 2; ++k) {
    Backend& be = *backends[k];
    auto d_x = upload_to(be, x), d_g = upload_to(be, gamma), d_b = upload_to(be, beta), d_dy = upload_to(be, dy);
    auto y = upload_to(be, poison_halves(x.size()));
    auto mean = upload_to(be, nan_floats(rows)), rstd = upload_to(be, nan_floats(rows));
    LayerNormForward forward;
    forward.x = d_x.data();
    forward.gamma = d_g.data();
    forward.beta = d_b.data();
    forward.rows = rows;
    forward.cols = cols;
    forward.eps = kLayerNormEps;
    forward.y = y.data();
    forward.mean = mean.data();
    forward.rstd = rstd.data();
    layernorm_forward_lowp(be, forward);
    o[k].y = y.download();
    o[k].mean = mean.download();
    o[k].rstd = rstd.download();
    // The backward of both backends reads the reference's statistics.
    mean.upload(o[0].mean);
    rstd.upload(o[0].rstd);
    LayerNormBackward backward;
    backward.dy = d_dy.data();
    backward.x = d_x.data();
    backward.gamma = d_g.data();
    backward.mean = mean.data();
    backward.rstd = rstd.data();
    backward.rows = rows;
    backward.cols = cols;
    for (int acc = 0; acc < 2; ++acc) {
      auto dx = upload_to(be, acc ? prev_dx : poison_halves(x.size()));
      auto dg = upload_to(be, acc ? prev_p : poison_halves(cols)),
           db = upload_to(be, acc ? prev_p : poison_halves(cols));
      backward.dx = dx.data();
      backward.accumulate_dx = acc != 0;
      backward.dgamma = dg.data();
      backward.dbeta = db.data();
      backward.accumulate_params = acc != 0;
      layernorm_backward_lowp(be, backward);
      o[k].dx[acc] = dx.download();
      o[k].dgamma[acc] = dg.download();
      o[k].dbeta[acc] = db.download();
      if (k == 1 && acc == 0) {  // run to run
        auto dg2 = upload_to(be, poison_halves(cols)), db2 = upload_to(be, poison_halves(cols));
        backward.dgamma = dg2.data();  // dx and both accumulate flags as above (acc == 0: false)
        backward.dbeta = db2.data();
        layernorm_backward_lowp(be, backward);
        EXPECT_TRUE(same_bits(fmt, dg2.download(), o[k].dgamma[0]) && same_bits(fmt, db2.download(), o[k].dbeta[0]) &&
                    same_bits(fmt, dx.download(), o[k].dx[0]))
            << "layernorm backward differs run to run";
      }
    }
  }
  const double stat_tol = fp32_sum_rel_tol(static_cast<size_t>(cols));
  expect_close(fmt, o[1].mean, o[0].mean, stat_tol, 1e-6, "mean");
  expect_close(fmt, o[1].rstd, o[0].rstd, stat_tol, 0.0, "rstd");
  expect_close(
      fmt, o[1].y, o[0].y, fmt.rel_tol(),
      [&](size_t i) {
        const int c = static_cast<int>(i % cols);
        return 2e-5 * (std::fabs(fwd_ref.y[i] - fmt.widen(beta[c])) + std::fabs(fmt.widen(beta[c]))) +
               kFp16SubnormalStep;
      },
      "y");
  for (int acc = 0; acc < 2; ++acc) {
    const std::string tag = acc ? " accumulate" : "";
    expect_close(
        fmt, o[1].dx[acc], o[0].dx[acc], fmt.rel_tol(),
        [&](size_t i) { return 2e-5 * grad_ref.dx_magnitude[i] + kFp16SubnormalStep; }, "dx" + tag);
    const double base = acc ? 1.0 : 0.0;  // |prev| <= 1
    expect_close(
        fmt, o[1].dgamma[acc], o[0].dgamma[acc], fmt.rel_tol(),
        [&](size_t c) { return 2e-5 * (grad_ref.dgamma_magnitude[c] + base) + kFp16SubnormalStep; }, "dgamma" + tag);
    expect_close(
        fmt, o[1].dbeta[acc], o[0].dbeta[acc], fmt.rel_tol(),
        [&](size_t c) { return 2e-5 * (grad_ref.dbeta_magnitude[c] + base) + kFp16SubnormalStep; }, "dbeta" + tag);
  }
}

inline void compare_residual_and_permutes(Backend& ref, Backend& dut, std::mt19937_64& rng) {
  const LowpFormat fmt{dut.precision()};
  const int B = 3, T = 37, nh = 4, hs = 24, C = nh * hs;
  const auto qkv = fmt.random(rng, static_cast<size_t>(B) * T * 3 * C, -4.0f, 4.0f);
  const auto other = fmt.random(rng, qkv.size(), -4.0f, 4.0f);
  std::vector<lowp16> sums[2], heads[2][3], merged[2];
  Backend* backends[2] = {&ref, &dut};
  for (int k = 0; k < 2; ++k) {
    Backend& be = *backends[k];
    auto a = upload_to(be, qkv), b = upload_to(be, other), y = upload_to(be, poison_halves(qkv.size()));
    AddLowp add;
    add.a = a.data();
    add.b = b.data();
    add.y = y.data();
    add.count = qkv.size();
    add_lowp(be, add);
    add.y = a.data();  // in place
    add_lowp(be, add);
    sums[k] = y.download();
    EXPECT_TRUE(same_bits(fmt, a.download(), sums[k])) << "in-place add";
    auto back = upload_to(be, poison_halves(qkv.size()));
    RowsToHeads split;
    split.row_stride = 3 * C;
    split.batch = B;
    split.seq_len = T;
    split.heads = nh;
    split.head_size = hs;
    HeadsToRows merge;
    merge.batch = B;
    merge.seq_len = T;
    merge.heads = nh;
    merge.head_size = hs;
    merge.row_stride = 3 * C;
    for (int p = 0; p < 3; ++p) {
      auto h = upload_to(be, poison_halves(static_cast<size_t>(B) * nh * T * hs));
      split.rows = y.data() + p * C;
      split.heads_out = h.data();
      rows_to_heads_lowp(be, split);
      heads[k][p] = h.download();
      merge.heads_in = h.data();
      merge.rows = back.data() + p * C;
      heads_to_rows_lowp(be, merge);
    }
    merged[k] = back.download();
    EXPECT_TRUE(same_bits(fmt, merged[k], sums[k])) << "merge of the split is not the identity";
  }
  expect_halves_equal(fmt, sums[1], sums[0], "residual add");
  for (int p = 0; p < 3; ++p) expect_halves_equal(fmt, heads[1][p], heads[0][p], "heads " + std::to_string(p));
}

inline void compare_padded_cross_entropy(Backend& ref, Backend& dut, std::mt19937_64& rng, int rows, int cols,
                                         int real_cols) {
  const LowpFormat fmt{dut.precision()};
  SCOPED_TRACE("xent rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               " real=" + std::to_string(real_cols));
  auto logits = fmt.random(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f);
  for (int r = 0; r < rows; ++r)  // padded logits that would win if they were classes
    for (int c = real_cols; c < cols; ++c) logits[static_cast<size_t>(r) * cols + c] = fmt.narrow(9.0f);
  const auto labels = random_labels(rng, rows, real_cols);
  for (int r = 0; r < rows; r += 2)
    logits[static_cast<size_t>(r) * cols + labels[r]] = fmt.narrow(5.0f);  // correct rows
  std::vector<float> loss[2];
  std::vector<int32_t> correct[2];
  std::vector<lowp16> grad[2];
  Backend* backends[2] = {&ref, &dut};
  for (int k = 0; k < 2; ++k) {
    Backend& be = *backends[k];
    auto l = upload_to(be, logits);
    auto lab = upload_to(be, labels);
    auto d_loss = upload_to(be, nan_floats(1));
    auto d_correct = upload_to(be, std::vector<int32_t>{-1});
    auto d_grad = upload_to(be, poison_halves(logits.size()));
    SoftmaxXentForward xent;
    xent.logits = l.data();
    xent.labels = lab.data();
    xent.rows = rows;
    xent.cols = cols;
    xent.real_cols = real_cols;
    xent.loss_mean = d_loss.data();
    xent.correct_count = d_correct.data();
    softmax_xent_forward(be, xent);
    SoftmaxXentBackward dxent;
    dxent.logits = l.data();
    dxent.labels = lab.data();
    dxent.rows = rows;
    dxent.cols = cols;
    dxent.real_cols = real_cols;
    dxent.loss_scale = 4096.0f;
    dxent.dlogits = d_grad.data();
    softmax_xent_backward(be, dxent);
    loss[k] = d_loss.download();
    correct[k] = d_correct.download();
    grad[k] = d_grad.download();
  }
  expect_close(fmt, loss[1], loss[0], fp32_sum_rel_tol(static_cast<size_t>(rows) + real_cols), 1e-6, "loss");
  EXPECT_EQ(correct[1], correct[0]);
  expect_close(fmt, grad[1], grad[0], fmt.rel_tol(), 4.0 * std::ldexp(1.0, -24) * 4096.0 / rows + kFp16SubnormalStep,
               "dlogits");
  size_t nonzero_padding = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = real_cols; c < cols; ++c) nonzero_padding += grad[1][static_cast<size_t>(r) * cols + c].bits != 0;
  EXPECT_EQ(nonzero_padding, 0u) << "padded columns must get an exact 0 gradient";
}

}  // namespace ddp::test
