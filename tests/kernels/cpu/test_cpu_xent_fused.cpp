// test_cpu_xent_fused.cpp: the chunked classifier's fused cross-entropy step
// (softmax_xent_fused_rows, then loss_rows_mean) against the unfused pair
// softmax_xent_forward + softmax_xent_backward on the CPU: the same bits,
// row losses, mean and gradient, whatever the chunks and the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/softmax_xent.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h

struct XentCase {
  int rows;
  int cols;
  int real_cols;
  int chunk;
};

// The loss and gradient of `rows` rows by the unfused pair.
void unfused(CpuBackend& cpu, const std::vector<lowp16>& logits, const std::vector<int32_t>& labels, const XentCase& c,
             float scale, float* loss, std::vector<lowp16>& grad) {
  Buffer<lowp16> dl(cpu, logits.size()), dg(cpu, logits.size());
  Buffer<int32_t> dlab(cpu, labels.size());
  Buffer<float> dloss(cpu, 1);
  dl.upload(logits);
  dlab.upload(labels);
  dg.upload(LowpFormat::poison(logits.size()));
  SoftmaxXentForward xent;
  xent.logits = dl.data();
  xent.labels = dlab.data();
  xent.rows = c.rows;
  xent.cols = c.cols;
  xent.real_cols = c.real_cols;
  xent.loss_mean = dloss.data();
  xent.correct_count = nullptr;
  softmax_xent_forward(cpu, xent);
  SoftmaxXentBackward dxent;
  dxent.logits = dl.data();
  dxent.labels = dlab.data();
  dxent.rows = c.rows;
  dxent.cols = c.cols;
  dxent.real_cols = c.real_cols;
  dxent.loss_scale = scale;
  dxent.dlogits = dg.data();
  softmax_xent_backward(cpu, dxent);
  *loss = dloss.download()[0];
  grad = dg.download();
}

// The same by the fused step, chunk rows at a time, the gradient over the logits.
void fused(CpuBackend& cpu, const std::vector<lowp16>& logits, const std::vector<int32_t>& labels, const XentCase& c,
           float scale, float* loss, std::vector<lowp16>& grad) {
  Buffer<lowp16> dl(cpu, logits.size());
  Buffer<int32_t> dlab(cpu, labels.size());
  Buffer<float> row_loss(cpu, static_cast<size_t>(c.rows)), dloss(cpu, 1);
  dl.upload(logits);
  dlab.upload(labels);
  row_loss.upload(std::vector<float>(row_loss.count(), NAN));
  for (int r0 = 0; r0 < c.rows; r0 += c.chunk) {
    const int n = std::min(c.chunk, c.rows - r0);
    const size_t at = static_cast<size_t>(r0);
    SoftmaxXentFusedRows step;
    step.logits_to_grad = dl.data() + at * c.cols;
    step.labels = dlab.data() + at;
    step.rows = n;
    step.cols = c.cols;
    step.real_cols = c.real_cols;
    step.total_rows = c.rows;
    step.loss_scale = scale;
    step.row_loss = row_loss.data() + at;
    softmax_xent_fused_rows(cpu, step);
  }
  LossRowsMean mean;
  mean.row_loss = row_loss.data();
  mean.rows = c.rows;
  mean.loss_mean = dloss.data();
  loss_rows_mean(cpu, mean);
  *loss = dloss.download()[0];
  grad = dl.download();
}

TEST_P(CpuLowpKernelsThreaded, FusedCrossEntropyRowsGiveTheUnfusedBits) {
  const XentCase cases[] = {{67, 10, 10, 67}, {67, 10, 10, 16}, {130, 1024, 1000, 48}, {5, 64, 60, 2}, {1, 3, 3, 1}};
  for (const XentCase& c : cases) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + " cols " + std::to_string(c.cols) + " real " +
                 std::to_string(c.real_cols) + " chunk " + std::to_string(c.chunk));
    const auto logits = fmt.random(rng, static_cast<size_t>(c.rows) * c.cols, -8.0f, 8.0f);
    auto labels = random_labels(rng, static_cast<size_t>(c.rows), c.real_cols);
    // A label that is not a class gives a NaN row (and mean) on both paths.
    if (c.rows == 5) labels[3] = c.real_cols;
    const float scale = 1024.0f;
    float want_loss = 0;
    std::vector<lowp16> want_grad;
    unfused(one, logits, labels, c, scale, &want_loss, want_grad);
    for (CpuBackend* cpu : {&one, &two}) {
      SCOPED_TRACE(std::to_string(cpu->threads()) + " threads");
      float got_loss = 0;
      std::vector<lowp16> got_grad;
      fused(*cpu, logits, labels, c, scale, &got_loss, got_grad);
      EXPECT_EQ(bits_of(got_loss), bits_of(want_loss)) << got_loss << " vs " << want_loss;
      ASSERT_EQ(got_grad.size(), want_grad.size());
      EXPECT_EQ(0, std::memcmp(got_grad.data(), want_grad.data(), got_grad.size() * sizeof(lowp16)))
          << "the fused gradient differs from the unfused one";
    }
  }
}

}  // namespace
}  // namespace ddp
