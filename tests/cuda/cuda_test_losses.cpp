// cuda_test_losses.cpp: CudaBackend's loss kernels (softmax cross-entropy,
// mean squared error, forward and backward) against CpuBackend on the same
// inputs. Tolerances: cuda_test_support.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/ops/mse.h"
#include "kernels/ops/softmax_xent.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- losses -------------------------------------------------------------------------

TEST_P(CudaLowpKernels, SoftmaxCrossEntropyForwardBackward) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{257, 10}, {64, 1000}, {1, 1}, {3, 33}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
    auto logits = fmt.random(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f);
    const auto labels = test::random_labels(rng, rows, cols);
    // Make about half the rows correct, and put exact ties in some rows:
    // the first maximum must win (torch.argmax), on both backends.
    for (int r = 0; r < rows; ++r) {
      lowp16* row = logits.data() + static_cast<size_t>(r) * cols;
      if (r % 2 == 0) row[labels[r]] = fmt.narrow(4.5f);
      if (r % 3 == 0 && cols > 1) {
        const int other = (labels[r] + 1) % cols;
        row[other] = fmt.narrow(5.0f);
        row[labels[r]] = fmt.narrow(5.0f);  // tie: correct only if label < other
      }
    }
    auto dl = both(logits);
    auto lab = both(labels);
    auto loss = both(nan_floats(1));
    auto correct = both(std::vector<int32_t>{-1});
    SoftmaxXentForward xent;
    xent.rows = rows;
    xent.cols = cols;
    xent.real_cols = cols;
    xent.logits = dl.cpu.data();
    xent.labels = lab.cpu.data();
    xent.loss_mean = loss.cpu.data();
    xent.correct_count = correct.cpu.data();
    softmax_xent_forward(cpu, xent);
    xent.logits = dl.gpu.data();
    xent.labels = lab.gpu.data();
    xent.loss_mean = loss.gpu.data();
    xent.correct_count = correct.gpu.data();
    softmax_xent_forward(*gpu, xent);
    // Per-row sums over cols terms, then a mean over rows.
    expect_close(fmt, loss.gpu.download(), loss.cpu.download(), fp32_sum_rel_tol(static_cast<size_t>(rows) + cols),
                 1e-6, "loss");
    EXPECT_EQ(correct.gpu.download(), correct.cpu.download());

    // Without a correct-count pointer.
    auto loss_only = both(nan_floats(1));
    xent.loss_mean = loss_only.gpu.data();
    xent.correct_count = nullptr;
    softmax_xent_forward(*gpu, xent);
    EXPECT_TRUE(same_float(loss_only.gpu.download()[0], loss.gpu.download()[0]));

    for (float scale : {1.0f, 1024.0f}) {
      auto grad = both(test::poison_halves(logits.size()));
      SoftmaxXentBackward dxent;
      dxent.rows = rows;
      dxent.cols = cols;
      dxent.real_cols = cols;
      dxent.loss_scale = scale;
      dxent.logits = dl.cpu.data();
      dxent.labels = lab.cpu.data();
      dxent.dlogits = grad.cpu.data();
      softmax_xent_backward(cpu, dxent);
      dxent.logits = dl.gpu.data();
      dxent.labels = lab.gpu.data();
      dxent.dlogits = grad.gpu.data();
      softmax_xent_backward(*gpu, dxent);
      // expf last bits on p <= 1, times scale / rows.
      expect_close(fmt, grad.gpu.download(), grad.cpu.download(), fmt.rel_tol(),
                   4.0 * std::ldexp(1.0, -24) * scale / rows + kFp16SubnormalStep,
                   "dlogits scale " + std::to_string(scale));
    }
  }
}

// The chunked classifier's step: each chunk's rows get their loss and the
// gradient over their logits; the mean of the row losses is the forward's.
TEST_P(CudaLowpKernels, FusedCrossEntropyRowsMatchTheCpu) {
  SCOPED_TRACE(seed_text());
  const int rows = 130, cols = 1024, real_cols = 1000, chunk = 48;
  const auto logits = fmt.random(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f);
  auto labels = test::random_labels(rng, rows, real_cols);
  auto dl = both(logits);
  auto lab = both(labels);
  auto row_loss = both(nan_floats(rows));
  const float scale = 1024.0f;
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    const size_t at = static_cast<size_t>(r0);
    SoftmaxXentFusedRows step;
    step.rows = n;
    step.cols = cols;
    step.real_cols = real_cols;
    step.total_rows = rows;
    step.loss_scale = scale;
    step.logits_to_grad = dl.cpu.data() + at * cols;
    step.labels = lab.cpu.data() + at;
    step.row_loss = row_loss.cpu.data() + at;
    softmax_xent_fused_rows(cpu, step);
    step.logits_to_grad = dl.gpu.data() + at * cols;
    step.labels = lab.gpu.data() + at;
    step.row_loss = row_loss.gpu.data() + at;
    softmax_xent_fused_rows(*gpu, step);
  }
  expect_close(fmt, row_loss.gpu.download(), row_loss.cpu.download(), fp32_sum_rel_tol(cols), 1e-6, "row losses");
  expect_close(fmt, dl.gpu.download(), dl.cpu.download(), fmt.rel_tol(),
               4.0 * std::ldexp(1.0, -24) * scale / rows + kFp16SubnormalStep, "dlogits over the logits");
  auto mean = both(nan_floats(1));
  LossRowsMean mean_op;
  mean_op.rows = rows;
  mean_op.row_loss = row_loss.cpu.data();
  mean_op.loss_mean = mean.cpu.data();
  loss_rows_mean(cpu, mean_op);
  mean_op.row_loss = row_loss.gpu.data();
  mean_op.loss_mean = mean.gpu.data();
  loss_rows_mean(*gpu, mean_op);
  expect_close(fmt, mean.gpu.download(), mean.cpu.download(), fp32_sum_rel_tol(static_cast<size_t>(rows) + cols), 1e-6,
               "mean");
}

TEST_P(CudaLowpKernels, MeanSquaredErrorForwardBackward) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{37, 101}, {1, 1}, {1000, 3}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    const size_t n = static_cast<size_t>(rows) * cols;
    auto pred = both(fmt.random(rng, n, -2.0f, 2.0f));
    auto target = both(test::random_floats(rng, n, -2.0f, 2.0f));
    auto loss = both(nan_floats(1));
    MseForward mse;
    mse.rows = rows;
    mse.cols = cols;
    mse.pred = pred.cpu.data();
    mse.target = target.cpu.data();
    mse.loss_mean = loss.cpu.data();
    mse_forward(cpu, mse);
    mse.pred = pred.gpu.data();
    mse.target = target.gpu.data();
    mse.loss_mean = loss.gpu.data();
    mse_forward(*gpu, mse);
    expect_close(fmt, loss.gpu.download(), loss.cpu.download(), fp32_sum_rel_tol(n), 0.0, "mse loss");
    auto grad = both(test::poison_halves(n));
    MseBackward dmse;
    dmse.rows = rows;
    dmse.cols = cols;
    dmse.loss_scale = 512.0f;
    dmse.pred = pred.cpu.data();
    dmse.target = target.cpu.data();
    dmse.dpred = grad.cpu.data();
    mse_backward(cpu, dmse);
    dmse.pred = pred.gpu.data();
    dmse.target = target.gpu.data();
    dmse.dpred = grad.gpu.data();
    mse_backward(*gpu, dmse);
    expect_close(fmt, grad.gpu.download(), grad.cpu.download(), fmt.rel_tol(), kFp16SubnormalStep, "dpred");
  }
}

}  // namespace
}  // namespace ddp
