// test_softmax_xent.cpp: the cross-entropy ops (kernels/ops/
// softmax_xent.h), FP16 and BF16: the CPU row's loss against a double
// logsumexp, and the CUDA rows (the rows with their argmax, the fixed-order
// mean, the backward pass, the chunked classifier's fused step) against the
// CPU rows (op_test_support.h). Tolerances as tests/cuda/
// cuda_test_losses.cpp: per-row sums of exp in another order (warp
// butterfly against the CPU's row order) and the mean over rows in double
// against the CPU's float sum, so FP32 summation-order tolerances;
// gradients to two ulps of the format (expf's last bits on a GPU, the sum's
// order here) plus a floor where p - 1 cancels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/op_test_support.h"
#include "kernels/ops/softmax_xent.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class SoftmaxXent : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kFp32Ulp = 1.0 / (1 << 24);  // 2^-24
constexpr double kFp16SubnormalStep = 6e-8;   // 2^-24: the smallest FP16 step, the gradients' floor

std::string shape_text(int rows, int cols, int real_cols) {
  return std::to_string(rows) + "x" + std::to_string(cols) + " (" + std::to_string(real_cols) + " classes)";
}

// The cross-entropy forward on both rows: the CPU row on the host vectors
// (the CPU backend's memory is the host's), the CUDA row on device copies.
struct XentForwardResult {
  float loss = NAN;
  int32_t correct = -1;
};

SoftmaxXentForward xent_forward_op(int rows, int cols, int real_cols) {
  SoftmaxXentForward op;
  op.rows = rows;
  op.cols = cols;
  op.real_cols = real_cols;
  return op;
}

XentForwardResult cpu_xent_forward(CpuBackend& cpu, const std::vector<lowp16>& logits,
                                   const std::vector<int32_t>& labels, int rows, int cols, int real_cols) {
  XentForwardResult r;
  SoftmaxXentForward op = xent_forward_op(rows, cols, real_cols);
  op.logits = logits.data();
  op.labels = labels.data();
  op.loss_mean = &r.loss;
  op.correct_count = &r.correct;
  softmax_xent_forward(cpu, op);
  return r;
}

XentForwardResult device_xent_forward(TestCudaOpContext& cuda, const std::vector<lowp16>& logits,
                                      const std::vector<int32_t>& labels, int rows, int cols, int real_cols,
                                      bool count = true) {
  DeviceArray<lowp16> d_logits(logits.empty() ? std::vector<lowp16>(1) : logits);
  DeviceArray<int32_t> d_labels(labels.empty() ? std::vector<int32_t>(1) : labels);
  DeviceArray<float> d_loss(std::vector<float>{NAN});
  DeviceArray<int32_t> d_correct(std::vector<int32_t>{-1});
  SoftmaxXentForward op = xent_forward_op(rows, cols, real_cols);
  op.logits = d_logits.get();
  op.labels = d_labels.get();
  op.loss_mean = d_loss.get();
  op.correct_count = count ? d_correct.get() : nullptr;
  softmax_xent_forward_cuda(cuda, op);
  return {d_loss.download()[0], d_correct.download()[0]};
}

// The loss in double: mean_r [log(sum_j exp(x_rj - m_r)) + m_r - x_r,label]
// over the classes, from the same 16-bit logits.
double double_xent_loss(const LowpFormat& fmt, const std::vector<lowp16>& logits, const std::vector<int32_t>& labels,
                        int rows, int cols, int real_cols) {
  double total = 0.0;
  for (int r = 0; r < rows; ++r) {
    const lowp16* row = logits.data() + static_cast<size_t>(r) * cols;
    double max = -INFINITY;
    for (int j = 0; j < real_cols; ++j) max = std::max(max, static_cast<double>(fmt.widen(row[j])));
    double sum = 0.0;
    for (int j = 0; j < real_cols; ++j) sum += std::exp(fmt.widen(row[j]) - max);
    total += std::log(sum) + max - fmt.widen(row[labels[static_cast<size_t>(r)]]);
  }
  return rows > 0 ? total / rows : 0.0;
}

// Random logits in [-4, 4] with labels in [0, real_cols): about half the rows
// made correct, exact ties in others (the first maximum must win,
// torch.argmax: a tie inside one lane's columns, j and j + 32, and across
// lanes, j and j + 1), and the padded columns set above every class, so
// that a kernel reading them gets another max or argmax.
struct XentInputs {
  std::vector<lowp16> logits;
  std::vector<int32_t> labels;
};

XentInputs xent_inputs(const LowpFormat& fmt, std::mt19937_64& rng, int rows, int cols, int real_cols) {
  XentInputs in;
  in.logits = fmt.random(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f);
  in.labels = random_labels(rng, static_cast<size_t>(rows), real_cols);
  for (int r = 0; r < rows; ++r) {
    lowp16* row = in.logits.data() + static_cast<size_t>(r) * cols;
    const int label = in.labels[r];
    if (r % 2 == 0) row[label] = fmt.narrow(4.5f);
    if (r % 3 == 0 && real_cols > 1) {
      const int other = (label + (r % 2 == 0 && real_cols > 32 ? 32 : 1)) % real_cols;
      row[other] = fmt.narrow(5.0f);
      row[label] = fmt.narrow(5.0f);  // tie: correct only if label < other
    }
    for (int j = real_cols; j < cols; ++j) row[j] = fmt.narrow(8.0f);
  }
  return in;
}

struct XentShape {
  int rows, cols, real_cols;
};

// One row; odd widths; rows wider than a block of 256 threads; padded
// vocabularies; more rows than one block's 8 warps; more rows than the
// mean's 1024 threads.
TEST_P(SoftmaxXent, XentForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const XentShape s : {XentShape{1, 1, 1}, XentShape{1, 33, 33}, XentShape{3, 33, 31}, XentShape{9, 300, 257},
                            XentShape{17, 40, 37}, XentShape{1030, 5, 5}}) {
    const std::string what = "xent forward " + shape_text(s.rows, s.cols, s.real_cols);
    const XentInputs in = xent_inputs(fmt, rng, s.rows, s.cols, s.real_cols);
    const XentForwardResult want = cpu_xent_forward(cpu, in.logits, in.labels, s.rows, s.cols, s.real_cols);
    // The CPU row against double: FP32 exponentials (cpu_exp8.h, a few ulps)
    // and FP32 sums over a row's classes and over the rows.
    const double exact = double_xent_loss(fmt, in.logits, in.labels, s.rows, s.cols, s.real_cols);
    EXPECT_NEAR(want.loss, exact, 4.0 * fp32_order_rel_tol(static_cast<size_t>(s.rows + s.real_cols)) * (1.0 + exact))
        << what << ": CPU row";
    const XentForwardResult got = device_xent_forward(cuda, in.logits, in.labels, s.rows, s.cols, s.real_cols);
    // Per-row sums over real_cols terms, then a mean over rows.
    expect_close({got.loss}, {want.loss}, fp32_order_rel_tol(static_cast<size_t>(s.rows + s.real_cols)), 1e-6,
                 what + ": loss");
    EXPECT_EQ(got.correct, want.correct) << what << ": correct count";
    // Without a count: the same loss, bit for bit.
    if (s.rows > 100) continue;  // (time)
    const XentForwardResult loss_only =
        device_xent_forward(cuda, in.logits, in.labels, s.rows, s.cols, s.real_cols, false);
    EXPECT_EQ(bits_of(loss_only.loss), bits_of(got.loss)) << what << ": loss without a count";
  }
}

TEST_P(SoftmaxXent, XentForwardOfNoRowsIsZero) {
  const XentForwardResult got = device_xent_forward(cuda, {}, {}, 0, 7, 7);
  EXPECT_EQ(bits_of(got.loss), bits_of(0.0f));
  EXPECT_EQ(got.correct, 0);
}

// Rows whose loss is not finite, each alone (so its loss is the mean) and
// all together: labels outside the classes (NaN, never correct), +Inf and
// -Inf logits (Inf - Inf in the sum: NaN; -Inf at the label: +Inf), a row
// of -Inf only (argmax 0), two +Inf (the first wins). NaN compared as a
// class, the correct counts exactly.
TEST_P(SoftmaxXent, XentForwardInvalidLabelsAndInfiniteLogitsAreTheCpus) {
  SCOPED_TRACE(seed_text());
  const int cols = 40, real_cols = 37;
  struct Row {
    const char* name;
    int label;
    std::vector<std::pair<int, float>> set;  // column, value
    bool all_neg_inf = false;
  };
  const std::vector<Row> rows = {
      {"label -1", -1, {}},
      {"label in the padding", real_cols, {}},
      {"label past the row", cols + 5, {}},
      {"+Inf at the label", 7, {{7, kInf}}},
      {"+Inf elsewhere", 7, {{5, kInf}}},
      {"-Inf at the label", 7, {{7, -kInf}}},
      {"-Inf elsewhere", 7, {{7, 5.0f}, {36, -kInf}}},
      {"only -Inf, label 0", 0, {}, true},
      {"+Inf twice in one lane, label the second", 35, {{3, kInf}, {35, kInf}}},
      {"+Inf in two lanes, label the first", 3, {{3, kInf}, {4, kInf}}},
  };
  std::vector<lowp16> all_logits;
  std::vector<int32_t> all_labels;
  for (const Row& row : rows) {
    std::vector<lowp16> logits = fmt.random(rng, cols, -4.0f, 4.0f);
    if (row.all_neg_inf)
      for (lowp16& x : logits) x = fmt.narrow(-kInf);
    for (const auto& [col, value] : row.set) logits[col] = fmt.narrow(value);
    const std::vector<int32_t> labels = {row.label};
    const XentForwardResult want = cpu_xent_forward(cpu, logits, labels, 1, cols, real_cols);
    const XentForwardResult got = device_xent_forward(cuda, logits, labels, 1, cols, real_cols);
    expect_close({got.loss}, {want.loss}, fp32_order_rel_tol(real_cols), 1e-6, std::string(row.name) + ": loss");
    EXPECT_EQ(got.correct, want.correct) << row.name << ": correct count";
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    all_labels.push_back(row.label);
  }
  const int n = static_cast<int>(rows.size());
  const XentForwardResult want = cpu_xent_forward(cpu, all_logits, all_labels, n, cols, real_cols);
  const XentForwardResult got = device_xent_forward(cuda, all_logits, all_labels, n, cols, real_cols);
  EXPECT_TRUE(std::isnan(want.loss));
  expect_close({got.loss}, {want.loss}, 0.0, 0.0, "all rows: loss");
  EXPECT_EQ(got.correct, want.correct) << "all rows: correct count";
}

// A NaN logit in a row (the code review's question, issue 48): the argmax
// is torch.argmax's, NaN larger than every number (argmax_math.h), on the
// CPU and in the kernel's warp. Before, the kernel's butterfly was not
// symmetric with a NaN (every comparison with NaN is false, so the two
// lanes of a pair kept different bests) and lane 0, whose argmax is
// written, missed the values that reached it only through the NaN lane;
// the CPU skipped a NaN past column 0. The loss is NaN on both sides (the
// sum of exp takes the NaN); the argmax shows in the correct count, with
// the label set to each candidate (the NaN's column: correct; the largest
// number's: not), one row per launch.
TEST_P(SoftmaxXent, XentForwardArgmaxWithANanLogitIsTheCpus) {
  SCOPED_TRACE(seed_text());
  const int cols = 100;
  struct Case {
    int nan_col, max_col;
    const char* why;
  };
  const Case cases[] = {
      {0, 50, "NaN in column 0 (lane 0's first)"},
      {40, 50, "NaN past a lane's first column"},
      {1, 2, "NaN in lane 1's first column, maximum in an even lane"},
      {16, 48, "NaN in lane 16's first column, maximum in lane 16's second column"},
      {1, 3, "NaN in lane 1's first column, maximum in another odd lane (reaches lane 0 only through lane 1)"},
      {5, 69, "NaN in lane 5's first column, maximum in lane 5's third column"},
  };
  for (const Case& c : cases) {
    std::vector<lowp16> logits = fmt.random(rng, cols, -4.0f, 4.0f);
    logits[c.nan_col].bits = fmt.nan_bits();
    logits[c.max_col] = fmt.narrow(5.0f);
    for (const int label : {c.nan_col, c.max_col}) {
      const std::string what = std::string(c.why) + "; NaN at " + std::to_string(c.nan_col) + ", max 5 at " +
                               std::to_string(c.max_col) + ", label " + std::to_string(label);
      const std::vector<int32_t> labels = {label};
      const XentForwardResult want = cpu_xent_forward(cpu, logits, labels, 1, cols, cols);
      const XentForwardResult got = device_xent_forward(cuda, logits, labels, 1, cols, cols);
      EXPECT_TRUE(std::isnan(got.loss)) << what << ": loss " << got.loss;
      EXPECT_TRUE(std::isnan(want.loss)) << what << ": CPU loss " << want.loss;
      EXPECT_EQ(want.correct, label == c.nan_col ? 1 : 0) << what << ": the CPU's argmax is the NaN's column";
      EXPECT_EQ(got.correct, want.correct) << what << ": correct count (1: argmax == label)";
    }
  }
}

// The gradient, dlogits poisoned: odd widths, one row, rows wider than a
// block, padded classes (exact zeros, the padding's logits never read),
// a label outside the classes (NaN row), the scale by value and read from
// device memory.
TEST_P(SoftmaxXent, XentBackwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const XentShape s : {XentShape{1, 1, 1}, XentShape{3, 33, 31}, XentShape{9, 300, 257}, XentShape{20, 64, 50}}) {
    XentInputs in = xent_inputs(fmt, rng, s.rows, s.cols, s.real_cols);
    if (s.rows > 3) in.labels[2] = s.rows % 2 ? -1 : s.real_cols;
    DeviceArray<lowp16> d_logits(in.logits);
    DeviceArray<int32_t> d_labels(in.labels);
    for (const float scale : {1.0f, 1024.0f}) {
      for (const bool scale_on_device : {false, true}) {
        const std::string what = "xent backward " + shape_text(s.rows, s.cols, s.real_cols) + ", scale " +
                                 std::to_string(scale) + (scale_on_device ? " (on the device)" : "");
        std::vector<lowp16> want(in.logits.size());
        SoftmaxXentBackward op;
        op.rows = s.rows;
        op.cols = s.cols;
        op.real_cols = s.real_cols;
        op.logits = in.logits.data();
        op.labels = in.labels.data();
        op.loss_scale = scale;
        op.dlogits = want.data();
        softmax_xent_backward(cpu, op);
        DeviceArray<float> d_scale(std::vector<float>{scale});
        DeviceArray<lowp16> d_grad(LowpFormat::poison(in.logits.size()));
        op.logits = d_logits.get();
        op.labels = d_labels.get();
        op.loss_scale = scale_on_device ? ScalarArg::at(d_scale.get()) : ScalarArg(scale);
        op.dlogits = d_grad.get();
        softmax_xent_backward_cuda(cuda, op);
        // expf's last bits (a GPU) and the sum's order on p <= 1, times scale / rows.
        expect_close(fmt, d_grad.download(), want, fmt.rel_tol(), 4.0 * kFp32Ulp * scale / s.rows + kFp16SubnormalStep,
                     what);
      }
    }
  }
}

// The chunked classifier's step, chunk by chunk over a batch (total_rows):
// each row's loss and the gradient written over its logits, a label outside
// the classes and a NaN logit (NaN loss, NaN gradient over the classes, 0 in
// the padding), the scale read from the device.
TEST_P(SoftmaxXent, XentFusedRowsMatchTheCpu) {
  SCOPED_TRACE(seed_text());
  const int rows = 21, cols = 300, real_cols = 257, chunk = 8;
  XentInputs in = xent_inputs(fmt, rng, rows, cols, real_cols);
  in.labels[4] = -1;
  in.logits[static_cast<size_t>(11) * cols + 100].bits = fmt.nan_bits();
  const float scale = 1024.0f;
  std::vector<lowp16> want_grad = in.logits;
  std::vector<float> want_loss(rows, NAN);
  DeviceArray<lowp16> d_logits(in.logits);
  DeviceArray<int32_t> d_labels(in.labels);
  DeviceArray<float> d_scale(std::vector<float>{scale});
  DeviceArray<float> d_loss(std::vector<float>(rows, NAN));
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    const size_t at = static_cast<size_t>(r0);
    SoftmaxXentFusedRows op;
    op.rows = n;
    op.cols = cols;
    op.real_cols = real_cols;
    op.total_rows = rows;
    op.logits_to_grad = want_grad.data() + at * cols;
    op.labels = in.labels.data() + at;
    op.loss_scale = scale;
    op.row_loss = want_loss.data() + at;
    softmax_xent_fused_rows(cpu, op);
    op.logits_to_grad = d_logits.get() + at * cols;
    op.labels = d_labels.get() + at;
    op.loss_scale = ScalarArg::at(d_scale.get());
    op.row_loss = d_loss.get() + at;
    softmax_xent_fused_rows_cuda(cuda, op);
  }
  expect_close(d_loss.download(), want_loss, fp32_order_rel_tol(real_cols), 1e-6, "row losses");
  expect_close(fmt, d_logits.download(), want_grad, fmt.rel_tol(), 4.0 * kFp32Ulp * scale / rows + kFp16SubnormalStep,
               "dlogits over the logits");
}

// The fixed-order mean of row losses: none, one, exactly and past the 1024
// threads of its block, a NaN row.
TEST_P(SoftmaxXent, LossRowsMeanMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const int rows : {0, 1, 1024, 1025, 3001}) {
    std::vector<float> row_loss = random_floats(rng, static_cast<size_t>(rows), 0.0f, 10.0f);
    const std::string what = "mean of " + std::to_string(rows) + " rows";
    DeviceArray<float> d_rows(row_loss.empty() ? std::vector<float>(1, NAN) : row_loss);
    DeviceArray<float> d_mean(std::vector<float>{NAN});
    // The CPU row's mean, and the CUDA row's on the device copy.
    auto means = [&](float* cpu_mean) {
      LossRowsMean op;
      op.rows = rows;
      op.row_loss = row_loss.data();
      op.loss_mean = cpu_mean;
      loss_rows_mean(cpu, op);
      op.row_loss = d_rows.get();
      op.loss_mean = d_mean.get();
      loss_rows_mean_cuda(cuda, op);
    };
    float want = NAN;
    means(&want);
    double exact = 0.0;
    for (const float x : row_loss) exact += x;
    EXPECT_NEAR(want, rows > 0 ? exact / rows : 0.0, fp32_order_rel_tol(static_cast<size_t>(rows)) * 10.0)
        << what << ": CPU row";
    expect_close(d_mean.download(), {want}, fp32_order_rel_tol(static_cast<size_t>(rows)), 1e-6, what);
    if (rows > 1) {
      row_loss[static_cast<size_t>(rows) - 2] = NAN;
      d_rows.upload(row_loss);
      means(&want);
      expect_close(d_mean.download(), {want}, 0.0, 0.0, what + ", one NaN");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, SoftmaxXent, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
