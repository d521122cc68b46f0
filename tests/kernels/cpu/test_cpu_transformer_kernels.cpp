// test_cpu_transformer_kernels.cpp: CpuBackend's GPT operations that are not
// attention (embeddings, LayerNorm, residual add, head permutes, the padded
// cross-entropy) against double references (transformer_reference.h) on
// fresh random inputs with every output poisoned first; the backward
// references against finite differences; and the same bits whatever the
// thread count and run to run. Tolerances: cpu_kernel_support.h (FP16 output:
// fmt.rel_tol(), 2 FP16 ulps, plus 1e-5 * the sum of |terms| that an FP32 sum
// or cancellation loses, plus one FP16 subnormal step).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/head_layout.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/softmax_xent.h"
#include "kernels/buffer.h"
#include "support/transformer_reference.h"

namespace ddp {
namespace {

using namespace test;

constexpr double kSub = 6e-8;  // one FP16 subnormal step

std::vector<int32_t> random_tokens(std::mt19937_64& rng, size_t count, int vocab) {
  return random_labels(rng, count, vocab);
}

TEST_P(CpuLowpKernels, EmbeddingForwardAddsTokenAndPositionRows) {
  const int B = 3, T = 7, C = 37, V = 11;
  const auto wte = fmt.random(rng, V * C), wpe = fmt.random(rng, (T + 2) * C);  // wpe longer than T
  auto tokens = random_tokens(rng, B * T, V);
  tokens[5] = V;  // out of range: a NaN row, nothing read outside wte
  Buffer<lowp16> d_wte(cpu, wte.size()), d_wpe(cpu, wpe.size()), out(cpu, B * T * C);
  Buffer<int32_t> d_tok(cpu, tokens.size());
  d_wte.upload(wte);
  d_wpe.upload(wpe);
  d_tok.upload(tokens);
  out.upload(fmt.poison(out.count()));
  EmbeddingForward forward;
  forward.tokens = d_tok.data();
  forward.wte = d_wte.data();
  forward.wpe = d_wpe.data();
  forward.batch = B;
  forward.seq_len = T;
  forward.channels = C;
  forward.vocab = V;
  forward.out = out.data();
  embedding_forward_lowp(cpu, forward);
  const auto got = out.download();
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < C; ++c) {
      const double g = fmt.widen(got[r * C + c]);
      if (r == 5) {
        ASSERT_TRUE(std::isnan(g)) << "row of an out-of-range token";
        continue;
      }
      const double want = static_cast<double>(fmt.widen(wte[tokens[r] * C + c])) + fmt.widen(wpe[(r % T) * C + c]);
      ASSERT_TRUE(close_enough(g, want, fmt.rel_tol(), kSub)) << r << "," << c << ": " << g << " vs " << want;
    }
}

TEST_P(CpuLowpKernels, EmbeddingBackwardSumsRowsPerTokenAndPosition) {
  const int B = 5, T = 9, C = 41, V = 13;
  // Tokens from [0, V - 2): the last two rows of the table get nothing.
  const auto tokens = random_tokens(rng, B * T, V - 2);
  const auto dout = fmt.random(rng, B * T * C), prev_wte = fmt.random(rng, V * C), prev_wpe = fmt.random(rng, T * C);
  Buffer<lowp16> d_out(cpu, dout.size()), d_wte(cpu, V * C), d_wpe(cpu, T * C);
  Buffer<int32_t> d_tok(cpu, tokens.size());
  d_out.upload(dout);
  d_tok.upload(tokens);
  EmbeddingBackward backward;
  backward.tokens = d_tok.data();
  backward.dout = d_out.data();
  backward.batch = B;
  backward.seq_len = T;
  backward.channels = C;
  backward.vocab = V;
  backward.d_wte = d_wte.data();
  backward.d_wpe = d_wpe.data();
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    d_wte.upload(accumulate ? prev_wte : fmt.poison(V * C));
    d_wpe.upload(accumulate ? prev_wpe : fmt.poison(T * C));
    backward.accumulate = accumulate;
    embedding_backward_lowp(cpu, backward);
    const auto g_wte = d_wte.download(), g_wpe = d_wpe.download();
    for (int v = 0; v < V; ++v)
      for (int c = 0; c < C; ++c) {
        double s = accumulate ? fmt.widen(prev_wte[v * C + c]) : 0.0, mag = std::fabs(s);
        for (int r = 0; r < B * T; ++r)
          if (tokens[r] == v) {
            s += fmt.widen(dout[r * C + c]);
            mag += std::fabs(fmt.widen(dout[r * C + c]));
          }
        ASSERT_TRUE(close_enough(fmt.widen(g_wte[v * C + c]), s, fmt.rel_tol(), 1e-5 * mag + kSub))
            << "wte " << v << "," << c;
      }
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) {
        double s = accumulate ? fmt.widen(prev_wpe[t * C + c]) : 0.0, mag = std::fabs(s);
        for (int b = 0; b < B; ++b)
          s += fmt.widen(dout[(b * T + t) * C + c]), mag += std::fabs(fmt.widen(dout[(b * T + t) * C + c]));
        ASSERT_TRUE(close_enough(fmt.widen(g_wpe[t * C + c]), s, fmt.rel_tol(), 1e-5 * mag + kSub))
            << "wpe " << t << "," << c;
      }
  }
}

struct LayerNormCase {
  int rows, cols;
  std::vector<lowp16> x, gamma, beta, dy;
};

LayerNormCase make_layernorm_case(const LowpFormat& fmt, std::mt19937_64& rng, int rows, int cols) {
  // An offset and a spread per row, as a residual stream has: the mean is
  // not 0 and the variance not 1, so both statistics matter.
  LayerNormCase c{rows,
                  cols,
                  {},
                  fmt.random(rng, cols, 0.5f, 1.5f),
                  fmt.random(rng, cols, -0.5f, 0.5f),
                  fmt.random(rng, static_cast<size_t>(rows) * cols)};
  std::uniform_real_distribution<float> offset(-3.0f, 3.0f), spread(0.1f, 4.0f);
  for (int r = 0; r < rows; ++r) {
    const float o = offset(rng), s = spread(rng);
    for (const lowp16 h : fmt.random(rng, cols)) c.x.push_back(fmt.narrow(o + s * fmt.widen(h)));
  }
  return c;
}

TEST_P(CpuLowpKernels, LayerNormForwardMatchesDouble) {
  const auto c = make_layernorm_case(fmt, rng, 29, 96);
  Buffer<lowp16> x(cpu, c.x.size()), gamma(cpu, c.cols), beta(cpu, c.cols), y(cpu, c.x.size());
  Buffer<float> mean(cpu, c.rows), rstd(cpu, c.rows);
  x.upload(c.x);
  gamma.upload(c.gamma);
  beta.upload(c.beta);
  y.upload(fmt.poison(y.count()));
  mean.upload(std::vector<float>(c.rows, NAN));
  rstd.upload(std::vector<float>(c.rows, NAN));
  LayerNormForward forward;
  forward.x = x.data();
  forward.gamma = gamma.data();
  forward.beta = beta.data();
  forward.rows = c.rows;
  forward.cols = c.cols;
  forward.eps = kLayerNormEps;
  forward.y = y.data();
  forward.mean = mean.data();
  forward.rstd = rstd.data();
  layernorm_forward_lowp(cpu, forward);
  const auto ref = layernorm_reference(fmt.widened_doubles(c.x), fmt.widened_doubles(c.gamma),
                                       fmt.widened_doubles(c.beta), c.rows, c.cols, 1e-5);
  const auto got_y = y.download();
  const auto got_mean = mean.download(), got_rstd = rstd.download();
  for (int r = 0; r < c.rows; ++r) {
    // FP32 sums of 96 terms of |x| <= ~7: a few 1e-6 of the row's magnitude.
    ASSERT_NEAR(got_mean[r], ref.mean[r], 1e-5 * (1 + std::fabs(ref.mean[r]))) << r;
    ASSERT_TRUE(close_enough(got_rstd[r], ref.rstd[r], 1e-5, 0)) << r;
    for (int j = 0; j < c.cols; ++j) {
      const size_t at = static_cast<size_t>(r) * c.cols + j;
      const double xhat = (fmt.widen(c.x[at]) - ref.mean[r]) * ref.rstd[r];
      const double floor = 1e-5 * (std::fabs(xhat * fmt.widen(c.gamma[j])) + std::fabs(fmt.widen(c.beta[j]))) + kSub;
      ASSERT_TRUE(close_enough(fmt.widen(got_y[at]), ref.y[at], fmt.rel_tol(), floor)) << r << "," << j;
    }
  }
}

TEST_P(CpuLowpKernels, LayerNormGradientReferenceMatchesFiniteDifferences) {
  // The double reference the kernel is held to, checked on its own:
  // L = sum(dy * y(x, gamma)), central differences with step 1e-6 (double).
  const auto c = make_layernorm_case(fmt, rng, 3, 12);
  auto x = fmt.widened_doubles(c.x), gamma = fmt.widened_doubles(c.gamma);
  const auto dy = fmt.widened_doubles(c.dy), beta = fmt.widened_doubles(c.beta);
  const auto loss = [&] {
    const auto f = layernorm_reference(x, gamma, beta, c.rows, c.cols, 1e-5);
    double l = 0;
    for (size_t i = 0; i < dy.size(); ++i) l += dy[i] * f.y[i];
    return l;
  };
  const auto ref = layernorm_grad_reference(dy, x, gamma, c.rows, c.cols, 1e-5);
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    ASSERT_NEAR((up - down) / (2 * h), ref.dx[i], 1e-6 * (1 + std::fabs(ref.dx[i]))) << "dx " << i;
  }
  for (int j = 0; j < c.cols; ++j) {
    const double keep = gamma[j];
    gamma[j] = keep + h;
    const double up = loss();
    gamma[j] = keep - h;
    const double down = loss();
    gamma[j] = keep;
    ASSERT_NEAR((up - down) / (2 * h), ref.dgamma[j], 1e-6 * (1 + std::fabs(ref.dgamma[j]))) << "dgamma " << j;
  }
}

TEST_P(CpuLowpKernels, LayerNormBackwardMatchesDouble) {
  const auto c = make_layernorm_case(fmt, rng, 37, 80);
  const auto prev_dx = fmt.random(rng, c.x.size()), prev_dgamma = fmt.random(rng, c.cols),
             prev_dbeta = fmt.random(rng, c.cols);
  Buffer<lowp16> x(cpu, c.x.size()), gamma(cpu, c.cols), beta(cpu, c.cols), y(cpu, c.x.size()), dy(cpu, c.x.size()),
      dx(cpu, c.x.size()), dgamma(cpu, c.cols), dbeta(cpu, c.cols);
  Buffer<float> mean(cpu, c.rows), rstd(cpu, c.rows);
  x.upload(c.x);
  gamma.upload(c.gamma);
  beta.upload(c.beta);
  dy.upload(c.dy);
  LayerNormForward forward;
  forward.x = x.data();
  forward.gamma = gamma.data();
  forward.beta = beta.data();
  forward.rows = c.rows;
  forward.cols = c.cols;
  forward.eps = kLayerNormEps;
  forward.y = y.data();
  forward.mean = mean.data();
  forward.rstd = rstd.data();
  layernorm_forward_lowp(cpu, forward);
  const auto ref = layernorm_grad_reference(fmt.widened_doubles(c.dy), fmt.widened_doubles(c.x),
                                            fmt.widened_doubles(c.gamma), c.rows, c.cols, 1e-5);
  LayerNormBackward backward;
  backward.dy = dy.data();
  backward.x = x.data();
  backward.gamma = gamma.data();
  backward.mean = mean.data();
  backward.rstd = rstd.data();
  backward.rows = c.rows;
  backward.cols = c.cols;
  backward.dx = dx.data();
  backward.dgamma = dgamma.data();
  backward.dbeta = dbeta.data();
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    dx.upload(accumulate ? prev_dx : fmt.poison(dx.count()));
    dgamma.upload(accumulate ? prev_dgamma : fmt.poison(c.cols));
    dbeta.upload(accumulate ? prev_dbeta : fmt.poison(c.cols));
    backward.accumulate_dx = accumulate;
    backward.accumulate_params = accumulate;
    layernorm_backward_lowp(cpu, backward);
    const auto got_dx = dx.download(), got_dg = dgamma.download(), got_db = dbeta.download();
    for (size_t i = 0; i < got_dx.size(); ++i) {
      const double base = accumulate ? fmt.widen(prev_dx[i]) : 0.0;
      // FP32 statistics and sums over 80 columns: 1e-5 of the cancelling terms.
      const double floor = 1e-5 * ref.dx_magnitude[i] + kSub;
      ASSERT_TRUE(close_enough(fmt.widen(got_dx[i]), base + ref.dx[i], fmt.rel_tol(), floor))
          << i << ": " << fmt.widen(got_dx[i]) << " vs " << base + ref.dx[i];
    }
    for (int j = 0; j < c.cols; ++j) {
      const double bg = accumulate ? fmt.widen(prev_dgamma[j]) : 0.0, bb = accumulate ? fmt.widen(prev_dbeta[j]) : 0.0;
      ASSERT_TRUE(close_enough(fmt.widen(got_dg[j]), bg + ref.dgamma[j], fmt.rel_tol(),
                               1e-5 * (ref.dgamma_magnitude[j] + std::fabs(bg)) + kSub))
          << "dgamma " << j;
      ASSERT_TRUE(close_enough(fmt.widen(got_db[j]), bb + ref.dbeta[j], fmt.rel_tol(),
                               1e-5 * (ref.dbeta_magnitude[j] + std::fabs(bb)) + kSub))
          << "dbeta " << j;
    }
  }
}

TEST_P(CpuLowpKernels, ResidualAddAndInPlaceAccumulate) {
  const size_t n = 1031;
  const auto a = fmt.random(rng, n, -4.0f, 4.0f), b = fmt.random(rng, n, -4.0f, 4.0f);
  Buffer<lowp16> da(cpu, n), db(cpu, n), y(cpu, n);
  da.upload(a);
  db.upload(b);
  y.upload(fmt.poison(n));
  AddLowp add;
  add.a = da.data();
  add.b = db.data();
  add.y = y.data();
  add.count = n;
  add_lowp(cpu, add);
  add.y = da.data();  // a += b
  add_lowp(cpu, add);
  const auto got = y.download(), in_place = da.download();
  for (size_t i = 0; i < n; ++i) {
    const double want = static_cast<double>(fmt.widen(a[i])) + fmt.widen(b[i]);
    ASSERT_TRUE(close_enough(fmt.widen(got[i]), want, fmt.rel_tol() / 2, kSub)) << i;  // exact sum, one rounding
    ASSERT_EQ(in_place[i].bits, got[i].bits) << i;
  }
}

TEST_P(CpuLowpKernels, HeadSplitAndMergeArePermutations) {
  const int B = 2, T = 5, nh = 3, hs = 4, C = nh * hs;
  const auto qkv = fmt.random(rng, B * T * 3 * C);
  Buffer<lowp16> d_qkv(cpu, qkv.size()), q(cpu, B * nh * T * hs), k(cpu, q.count()), v(cpu, q.count()),
      back(cpu, qkv.size());
  d_qkv.upload(qkv);
  back.upload(fmt.poison(back.count()));
  Buffer<lowp16>* parts[3] = {&q, &k, &v};
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
    parts[p]->upload(fmt.poison(q.count()));
    split.rows = d_qkv.data() + p * C;
    split.heads_out = parts[p]->data();
    rows_to_heads_lowp(cpu, split);
    const auto got = parts[p]->download();
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < nh; ++h)
        for (int t = 0; t < T; ++t)
          for (int d = 0; d < hs; ++d)
            ASSERT_EQ(got[((b * nh + h) * T + t) * hs + d].bits, qkv[(b * T + t) * 3 * C + p * C + h * hs + d].bits);
    // The inverse writes only its third of each row.
    merge.heads_in = parts[p]->data();
    merge.rows = back.data() + p * C;
    heads_to_rows_lowp(cpu, merge);
    const auto partial = back.download();
    for (size_t i = 0; i < qkv.size(); ++i) {
      const bool written = static_cast<int>(i % (3 * C)) / C <= p;
      ASSERT_EQ(partial[i].bits, written ? qkv[i].bits : kPoisonHalfBits) << i;
    }
  }
}

TEST_P(CpuLowpKernels, PaddedCrossEntropyIgnoresPaddedColumns) {
  const int rows = 23, real = 50, cols = 64;
  auto logits = fmt.random(rng, rows * cols, -3.0f, 3.0f);
  // Padded logits larger than any real one: they would win, and take
  // almost all the probability, if they were classes.
  for (int r = 0; r < rows; ++r)
    for (int c = real; c < cols; ++c) logits[r * cols + c] = fmt.narrow(8.0f);
  const auto labels = random_labels(rng, rows, real);
  // Every other row correct (its label the largest real logit): a padded
  // column taking part in the argmax would make them wrong.
  for (int r = 0; r < rows; r += 2) logits[r * cols + labels[r]] = fmt.narrow(4.0f);
  Buffer<lowp16> d_logits(cpu, logits.size()), grad(cpu, logits.size());
  Buffer<int32_t> d_labels(cpu, rows), correct(cpu, 1);
  Buffer<float> loss(cpu, 1);
  d_logits.upload(logits);
  d_labels.upload(labels);
  grad.upload(fmt.poison(grad.count()));
  SoftmaxXentForward xent;
  xent.logits = d_logits.data();
  xent.labels = d_labels.data();
  xent.rows = rows;
  xent.cols = cols;
  xent.real_cols = real;
  xent.loss_mean = loss.data();
  xent.correct_count = correct.data();
  softmax_xent_forward(cpu, xent);
  const float scale = 1024.0f;
  SoftmaxXentBackward dxent;
  dxent.logits = d_logits.data();
  dxent.labels = d_labels.data();
  dxent.rows = rows;
  dxent.cols = cols;
  dxent.real_cols = real;
  dxent.loss_scale = scale;
  dxent.dlogits = grad.data();
  softmax_xent_backward(cpu, dxent);
  double want_loss = 0;
  int want_correct = 0;
  const auto got = grad.download();
  for (int r = 0; r < rows; ++r) {
    double max_v = -INFINITY, sum = 0;
    int argmax = 0;
    for (int c = 0; c < real; ++c)
      if (fmt.widen(logits[r * cols + c]) > max_v) {
        max_v = fmt.widen(logits[r * cols + c]);
        argmax = c;
      }
    for (int c = 0; c < real; ++c) sum += std::exp(fmt.widen(logits[r * cols + c]) - max_v);
    want_loss += max_v + std::log(sum) - fmt.widen(logits[r * cols + labels[r]]);
    want_correct += argmax == labels[r];
    for (int c = 0; c < cols; ++c) {
      const lowp16 g = got[r * cols + c];
      if (c >= real) {
        ASSERT_EQ(g.bits, 0u) << "padded column " << c << " of row " << r << " has a gradient";
        continue;
      }
      const double p = std::exp(fmt.widen(logits[r * cols + c]) - max_v) / sum;
      const double want = scale * (p - (c == labels[r])) / rows;
      ASSERT_TRUE(close_enough(fmt.widen(g), want, fmt.rel_tol(), 1e-6 * scale / rows + kSub)) << r << "," << c;
    }
  }
  EXPECT_TRUE(close_enough(loss.download()[0], want_loss / rows, 1e-5, 0));
  EXPECT_EQ(correct.download()[0], want_correct);
  EXPECT_GE(want_correct, (rows + 1) / 2);

  // real_cols == cols is the unpadded call, bit for bit.
  Buffer<float> loss_full(cpu, 1), loss_same(cpu, 1);
  Buffer<lowp16> g_full(cpu, logits.size()), g_same(cpu, logits.size());
  SoftmaxXentForward unpadded;
  unpadded.logits = d_logits.data();
  unpadded.labels = d_labels.data();
  unpadded.rows = rows;
  unpadded.cols = cols;
  unpadded.real_cols = cols;
  unpadded.loss_mean = loss_full.data();
  unpadded.correct_count = nullptr;
  softmax_xent_forward(cpu, unpadded);
  unpadded.loss_mean = loss_same.data();
  softmax_xent_forward(cpu, unpadded);
  SoftmaxXentBackward dunpadded;
  dunpadded.logits = d_logits.data();
  dunpadded.labels = d_labels.data();
  dunpadded.rows = rows;
  dunpadded.cols = cols;
  dunpadded.real_cols = cols;
  dunpadded.loss_scale = scale;
  dunpadded.dlogits = g_full.data();
  softmax_xent_backward(cpu, dunpadded);
  dunpadded.dlogits = g_same.data();
  softmax_xent_backward(cpu, dunpadded);
  EXPECT_EQ(bits_of(loss_full.download()[0]), bits_of(loss_same.download()[0]));
  const auto full = g_full.download(), same = g_same.download();
  for (size_t i = 0; i < full.size(); ++i) ASSERT_EQ(full[i].bits, same[i].bits) << i;
}

TEST_P(CpuLowpKernels, PaddedCrossEntropyLabelInPaddingIsNaN) {
  const int rows = 3, real = 5, cols = 8;
  const auto logits = fmt.random(rng, rows * cols);
  const std::vector<int32_t> labels = {1, real, 2};  // row 1's label is a padded column
  Buffer<lowp16> d_logits(cpu, logits.size()), grad(cpu, logits.size());
  Buffer<int32_t> d_labels(cpu, rows);
  Buffer<float> loss(cpu, 1);
  d_logits.upload(logits);
  d_labels.upload(labels);
  SoftmaxXentForward xent;
  xent.logits = d_logits.data();
  xent.labels = d_labels.data();
  xent.rows = rows;
  xent.cols = cols;
  xent.real_cols = real;
  xent.loss_mean = loss.data();
  xent.correct_count = nullptr;
  softmax_xent_forward(cpu, xent);
  SoftmaxXentBackward dxent;
  dxent.logits = d_logits.data();
  dxent.labels = d_labels.data();
  dxent.rows = rows;
  dxent.cols = cols;
  dxent.real_cols = real;
  dxent.loss_scale = 1.0f;
  dxent.dlogits = grad.data();
  softmax_xent_backward(cpu, dxent);
  EXPECT_TRUE(std::isnan(loss.download()[0]));
  const auto g = grad.download();
  EXPECT_TRUE(std::isnan(fmt.widen(g[cols + 0])));
  EXPECT_FALSE(std::isnan(fmt.widen(g[0])));
}

// An overflowed logit (Inf) or a NaN must reach the loss and the gradient
// (the loss scaler skips the step on them), through the 8-lane exponentials
// (cpu_softmax_rows.h) and the portable loops alike; the other rows stay
// finite. Row 1 holds a NaN in a column that is neither the label nor the
// maximum, so only the exponentials' sum can carry it.
TEST_P(CpuLowpKernels, NonFiniteLogitsReachTheLossAndTheGradient) {
  const int rows = 4, cols = 37;
  for (bool f16c : {true, false}) {
    SCOPED_TRACE(f16c ? "f16c" : "portable");
    set_f16c_enabled(f16c);
    auto logits = fmt.random(rng, rows * cols, -3.0f, 3.0f);
    const std::vector<int32_t> labels = {0, 1, 2, 3};
    logits[1 * cols + 20] = fmt.narrow(NAN);
    logits[2 * cols + 30] = fmt.narrow(INFINITY);
    Buffer<lowp16> d_logits(cpu, logits.size()), grad(cpu, logits.size());
    Buffer<int32_t> d_labels(cpu, rows);
    Buffer<float> loss(cpu, 1);
    d_logits.upload(logits);
    d_labels.upload(labels);
    grad.upload(fmt.poison(grad.count()));
    SoftmaxXentForward xent;
    xent.logits = d_logits.data();
    xent.labels = d_labels.data();
    xent.rows = rows;
    xent.cols = cols;
    xent.real_cols = cols;
    xent.loss_mean = loss.data();
    xent.correct_count = nullptr;
    softmax_xent_forward(cpu, xent);
    SoftmaxXentBackward dxent;
    dxent.logits = d_logits.data();
    dxent.labels = d_labels.data();
    dxent.rows = rows;
    dxent.cols = cols;
    dxent.real_cols = cols;
    dxent.loss_scale = 1.0f;
    dxent.dlogits = grad.data();
    softmax_xent_backward(cpu, dxent);
    EXPECT_FALSE(std::isfinite(loss.download()[0]));
    const auto g = grad.download();
    for (int r = 0; r < rows; ++r) {
      bool finite = true;
      for (int c = 0; c < cols; ++c) finite = finite && std::isfinite(fmt.widen(g[r * cols + c]));
      EXPECT_EQ(finite, r == 0 || r == 3) << "row " << r;
    }
    // The causal softmax: a NaN score in a visible column makes its row NaN.
    const int t = 9;
    auto scores = fmt.random(rng, t * t);
    scores[5 * t + 2] = fmt.narrow(NAN);
    Buffer<lowp16> d_scores(cpu, scores.size()), probs(cpu, scores.size());
    d_scores.upload(scores);
    probs.upload(fmt.poison(probs.count()));
    CausalSoftmaxForward softmax;
    softmax.scores = d_scores.data();
    softmax.batch_heads = 1;
    softmax.seq_len = t;
    softmax.scale = 0.5f;
    softmax.probs = probs.data();
    causal_softmax_forward_lowp(cpu, softmax);
    const auto p = probs.download();
    for (int i = 0; i < t; ++i) EXPECT_EQ(std::isnan(fmt.widen(p[i * t + 0])), i == 5) << "row " << i;
  }
  set_f16c_enabled(true);
}

}  // namespace
}  // namespace ddp
