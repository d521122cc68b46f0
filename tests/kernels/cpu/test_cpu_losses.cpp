// test_cpu_losses.cpp: CpuBackend's loss kernels (softmax cross-entropy, mean
// squared error, forward and backward) against a double reference. Tolerances: cpu_kernel_support.h.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/mse.h"
#include "kernels/ops/softmax_xent.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h: CpuKernels, inputs, tolerances

TEST_P(CpuLowpKernels, SoftmaxCrossEntropy) {
  const int rows = 67, cols = 10;
  const float scale = 1024.0f;
  const auto logits = fmt.random(rng, rows * cols, -8.0f, 8.0f);
  const auto labels = test::random_labels(rng, rows, cols);
  Buffer<lowp16> dl(cpu, logits.size()), grad(cpu, logits.size());
  Buffer<int32_t> dlab(cpu, rows), correct(cpu, 1);
  Buffer<float> loss(cpu, 1);
  dl.upload(logits);
  dlab.upload(labels);
  grad.upload(fmt.poison(grad.count()));
  SoftmaxXentForward xent;
  xent.logits = dl.data();
  xent.labels = dlab.data();
  xent.rows = rows;
  xent.cols = cols;
  xent.real_cols = cols;
  xent.loss_mean = loss.data();
  xent.correct_count = correct.data();
  softmax_xent_forward(cpu, xent);
  SoftmaxXentBackward dxent;
  dxent.logits = dl.data();
  dxent.labels = dlab.data();
  dxent.rows = rows;
  dxent.cols = cols;
  dxent.real_cols = cols;
  dxent.loss_scale = scale;
  dxent.dlogits = grad.data();
  softmax_xent_backward(cpu, dxent);
  double want_loss = 0;
  int want_correct = 0;
  const auto g = grad.download();
  for (int r = 0; r < rows; ++r) {
    double mx = -1e30, se = 0;
    int arg = 0;
    for (int c = 0; c < cols; ++c)
      if (fmt.widen(logits[r * cols + c]) > mx) {
        mx = fmt.widen(logits[r * cols + c]);
        arg = c;
      }
    for (int c = 0; c < cols; ++c) se += std::exp(fmt.widen(logits[r * cols + c]) - mx);
    want_loss += mx + std::log(se) - fmt.widen(logits[r * cols + labels[r]]);
    want_correct += arg == labels[r];
    for (int c = 0; c < cols; ++c) {
      const double p = std::exp(fmt.widen(logits[r * cols + c]) - mx) / se;
      const double want = scale * (p - (c == labels[r])) / rows;
      ASSERT_TRUE(close_enough(fmt.widen(g[r * cols + c]), want, fmt.rel_tol(), 1e-4)) << r << "," << c;
    }
  }
  EXPECT_TRUE(close_enough(loss.download()[0], want_loss / rows, 1e-5, 1e-6));
  EXPECT_EQ(correct.download()[0], want_correct);
}

TEST_P(CpuLowpKernels, MeanSquaredError) {
  const int rows = 41, cols = 7;
  const float scale = 512.0f;
  const auto pred = fmt.random(rng, rows * cols);
  const auto target = test::random_floats(rng, rows * cols);
  Buffer<lowp16> dp(cpu, pred.size()), grad(cpu, pred.size());
  Buffer<float> dt(cpu, target.size()), loss(cpu, 1);
  dp.upload(pred);
  dt.upload(target);
  grad.upload(fmt.poison(grad.count()));
  MseForward mse;
  mse.pred = dp.data();
  mse.target = dt.data();
  mse.rows = rows;
  mse.cols = cols;
  mse.loss_mean = loss.data();
  mse_forward(cpu, mse);
  MseBackward dmse;
  dmse.pred = dp.data();
  dmse.target = dt.data();
  dmse.rows = rows;
  dmse.cols = cols;
  dmse.loss_scale = scale;
  dmse.dpred = grad.data();
  mse_backward(cpu, dmse);
  double want = 0;
  const auto g = grad.download();
  const double n = rows * cols;
  for (int i = 0; i < rows * cols; ++i) {
    const double d = static_cast<double>(fmt.widen(pred[i])) - target[i];
    want += d * d;
    ASSERT_TRUE(close_enough(fmt.widen(g[i]), scale * 2 * d / n, fmt.rel_tol(), 6e-8));
  }
  EXPECT_TRUE(close_enough(loss.download()[0], want / n, 1e-5, 1e-7));
}

}  // namespace
}  // namespace ddp
