// test_loss_ops.cpp: cuda_loss.cu's kernels (the cross-entropy rows with
// their argmax, the fixed-order mean, the backward pass, the chunked
// classifier's fused step, MSE's backward) and cuda_common.cuh's two-pass
// sum (through MSE's forward) against the CPU loops, FP16 and BF16
// (op_test_support.h). Tolerances as tests/cuda/cuda_test_losses.cpp:
// per-row sums of exp in another order (warp butterfly against the CPU's
// row order) and the mean over rows in double against the CPU's float sum,
// so FP32 summation-order tolerances; gradients to two ulps of the format
// (expf's last bits on a GPU, the sum's order here) plus a floor where
// p - 1 cancels; MSE's backward is the same FP32 operations on both sides,
// so bitwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_xent.h"
#include "kernels/cuda/cuda_loss.h"
#include "kernels/ops/op_test_support.h"

namespace ddp::test {
namespace {

using LossOps = OpTest;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kFp32Ulp = 1.0 / (1 << 24);  // 2^-24
constexpr double kFp16SubnormalStep = 6e-8;   // 2^-24: the smallest FP16 step, the gradients' floor

std::string shape_text(int rows, int cols, int real_cols) {
  return std::to_string(rows) + "x" + std::to_string(cols) + " (" + std::to_string(real_cols) + " classes)";
}

// The cross-entropy forward on both sides: the launcher on device copies,
// cpu::softmax_xent_forward on the host ones.
struct XentForwardResult {
  float loss = NAN;
  int32_t correct = -1;
};

XentForwardResult cpu_xent_forward(Precision p, CpuThreadPool& pool, const std::vector<lowp16>& logits,
                                   const std::vector<int32_t>& labels, int rows, int cols, int real_cols) {
  cpu::XentScratch scratch;
  XentForwardResult r;
  cpu::softmax_xent_forward(p, pool, scratch, logits.data(), labels.data(), rows, cols, real_cols, &r.loss, &r.correct);
  return r;
}

XentForwardResult device_xent_forward(Precision p, const std::vector<lowp16>& logits,
                                      const std::vector<int32_t>& labels, int rows, int cols, int real_cols,
                                      bool count = true) {
  DeviceArray<lowp16> d_logits(logits.empty() ? std::vector<lowp16>(1) : logits);
  DeviceArray<int32_t> d_labels(labels.empty() ? std::vector<int32_t>(1) : labels);
  DeviceArray<float> d_loss(std::vector<float>{NAN});
  DeviceArray<int32_t> d_correct(std::vector<int32_t>{-1});
  DeviceArray<uint8_t> scratch(softmax_xent_forward_scratch_bytes(rows));
  launch_softmax_xent_forward(nullptr, p, d_logits.get(), d_labels.get(), rows, cols, real_cols, d_loss.get(),
                              count ? d_correct.get() : nullptr, scratch.get());
  return {d_loss.download()[0], d_correct.download()[0]};
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
TEST_P(LossOps, XentForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const XentShape s : {XentShape{1, 1, 1}, XentShape{1, 33, 33}, XentShape{3, 33, 31}, XentShape{9, 300, 257},
                            XentShape{17, 40, 37}, XentShape{1030, 5, 5}}) {
    const std::string what = "xent forward " + shape_text(s.rows, s.cols, s.real_cols);
    const XentInputs in = xent_inputs(fmt, rng, s.rows, s.cols, s.real_cols);
    const XentForwardResult want =
        cpu_xent_forward(precision(), pool, in.logits, in.labels, s.rows, s.cols, s.real_cols);
    const XentForwardResult got = device_xent_forward(precision(), in.logits, in.labels, s.rows, s.cols, s.real_cols);
    // Per-row sums over real_cols terms, then a mean over rows.
    expect_close({got.loss}, {want.loss}, fp32_order_rel_tol(static_cast<size_t>(s.rows + s.real_cols)), 1e-6,
                 what + ": loss");
    EXPECT_EQ(got.correct, want.correct) << what << ": correct count";
    // Without a count: the same loss, bit for bit.
    if (s.rows > 100) continue;  // (time)
    const XentForwardResult loss_only =
        device_xent_forward(precision(), in.logits, in.labels, s.rows, s.cols, s.real_cols, false);
    EXPECT_EQ(bits_of(loss_only.loss), bits_of(got.loss)) << what << ": loss without a count";
  }
}

TEST_P(LossOps, XentForwardOfNoRowsIsZero) {
  const XentForwardResult got = device_xent_forward(precision(), {}, {}, 0, 7, 7);
  EXPECT_EQ(bits_of(got.loss), bits_of(0.0f));
  EXPECT_EQ(got.correct, 0);
}

// Rows whose loss is not finite, each alone (so its loss is the mean) and
// all together: labels outside the classes (NaN, never correct), +Inf and
// -Inf logits (Inf - Inf in the sum: NaN; -Inf at the label: +Inf), a row
// of -Inf only (argmax 0), two +Inf (the first wins). NaN compared as a
// class, the correct counts exactly.
TEST_P(LossOps, XentForwardInvalidLabelsAndInfiniteLogitsAreTheCpus) {
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
    const XentForwardResult want = cpu_xent_forward(precision(), pool, logits, labels, 1, cols, real_cols);
    const XentForwardResult got = device_xent_forward(precision(), logits, labels, 1, cols, real_cols);
    expect_close({got.loss}, {want.loss}, fp32_order_rel_tol(real_cols), 1e-6, std::string(row.name) + ": loss");
    EXPECT_EQ(got.correct, want.correct) << row.name << ": correct count";
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    all_labels.push_back(row.label);
  }
  const int n = static_cast<int>(rows.size());
  const XentForwardResult want = cpu_xent_forward(precision(), pool, all_logits, all_labels, n, cols, real_cols);
  const XentForwardResult got = device_xent_forward(precision(), all_logits, all_labels, n, cols, real_cols);
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
TEST_P(LossOps, XentForwardArgmaxWithANanLogitIsTheCpus) {
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
      const XentForwardResult want = cpu_xent_forward(precision(), pool, logits, labels, 1, cols, cols);
      const XentForwardResult got = device_xent_forward(precision(), logits, labels, 1, cols, cols);
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
TEST_P(LossOps, XentBackwardMatchesTheCpu) {
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
        cpu::softmax_xent_backward(precision(), pool, in.logits.data(), in.labels.data(), s.rows, s.cols, s.real_cols,
                                   scale, want.data());
        DeviceArray<float> d_scale(std::vector<float>{scale});
        DeviceArray<lowp16> d_grad(LowpFormat::poison(in.logits.size()));
        launch_softmax_xent_backward(nullptr, precision(), d_logits.get(), d_labels.get(), s.rows, s.cols, s.real_cols,
                                     scale_on_device ? ScalarArg::at(d_scale.get()) : ScalarArg(scale), d_grad.get());
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
TEST_P(LossOps, XentFusedRowsMatchTheCpu) {
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
    cpu::softmax_xent_fused_rows(precision(), pool, want_grad.data() + at * cols, in.labels.data() + at, n, cols,
                                 real_cols, rows, scale, want_loss.data() + at);
    launch_softmax_xent_fused_rows(nullptr, precision(), d_logits.get() + at * cols, d_labels.get() + at, n, cols,
                                   real_cols, rows, ScalarArg::at(d_scale.get()), d_loss.get() + at);
  }
  expect_close(d_loss.download(), want_loss, fp32_order_rel_tol(real_cols), 1e-6, "row losses");
  expect_close(fmt, d_logits.download(), want_grad, fmt.rel_tol(), 4.0 * kFp32Ulp * scale / rows + kFp16SubnormalStep,
               "dlogits over the logits");
}

// The fixed-order mean of row losses: none, one, exactly and past the 1024
// threads of its block, a NaN row.
TEST_P(LossOps, LossRowsMeanMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const int rows : {0, 1, 1024, 1025, 3001}) {
    std::vector<float> row_loss = random_floats(rng, static_cast<size_t>(rows), 0.0f, 10.0f);
    const std::string what = "mean of " + std::to_string(rows) + " rows";
    DeviceArray<float> d_rows(row_loss.empty() ? std::vector<float>(1, NAN) : row_loss);
    DeviceArray<float> d_mean(std::vector<float>{NAN});
    launch_loss_rows_mean(nullptr, d_rows.get(), rows, d_mean.get());
    expect_close(d_mean.download(), {cpu::loss_rows_mean(row_loss.data(), rows)},
                 fp32_order_rel_tol(static_cast<size_t>(rows)), 1e-6, what);
    if (rows > 1) {
      row_loss[static_cast<size_t>(rows) - 2] = NAN;
      d_rows.upload(row_loss);
      launch_loss_rows_mean(nullptr, d_rows.get(), rows, d_mean.get());
      expect_close(d_mean.download(), {cpu::loss_rows_mean(row_loss.data(), rows)}, 0.0, 0.0, what + ", one NaN");
    }
  }
}

// MSE's mean through launch_sum (partial_sums_kernel, finish_sum_kernel):
// no element (0), one, both sides of a block of 256, 79 blocks of partial
// sums; Inf and NaN in the prediction or the target. The CPU sums in float
// in order, the device in double by blocks: the FP32 order tolerance. (More
// than the first pass's 1024 blocks, where each thread sums several
// elements, takes 2 s here: test_optimizer_ops.cpp's L2 norm covers that
// loop once.)
TEST_P(LossOps, MseForwardMatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  CpuBackend cpu(1, precision());
  auto run = [&](const std::vector<lowp16>& pred, const std::vector<float>& target, const std::string& what,
                 double rel) {
    const size_t n = pred.size();
    float want = NAN;
    cpu.mse_forward(pred.data(), target.data(), n ? 1 : 0, static_cast<int>(n), &want);
    DeviceArray<lowp16> d_pred(n ? pred : std::vector<lowp16>(1));
    DeviceArray<float> d_target(n ? target : std::vector<float>(1));
    DeviceArray<float> d_loss(std::vector<float>{NAN});
    DeviceArray<uint8_t> scratch(mse_forward_scratch_bytes());
    launch_mse_forward(nullptr, precision(), d_pred.get(), d_target.get(), n, d_loss.get(), scratch.get());
    expect_close(d_loss.download(), {want}, rel, 0.0, what);
  };
  for (const size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{257}, size_t{4099}, size_t{20001}}) {
    const std::vector<lowp16> pred = fmt.random(rng, n, -2.0f, 2.0f);
    const std::vector<float> target = random_floats(rng, n, -2.0f, 2.0f);
    run(pred, target, "mse of " + std::to_string(n), fp32_order_rel_tol(n));
  }
  const size_t n = 3001;
  struct Bad {
    const char* name;
    size_t at;
    float pred, target;
  };
  for (const Bad bad : {Bad{"+Inf prediction", 0, kInf, 0.5f}, Bad{"-Inf prediction", n - 1, -kInf, 0.5f},
                        Bad{"NaN prediction", 1500, NAN, 0.5f}, Bad{"NaN target", n - 1, 0.5f, NAN},
                        Bad{"Inf - Inf", 77, kInf, kInf}}) {
    std::vector<lowp16> pred = fmt.random(rng, n, -2.0f, 2.0f);
    std::vector<float> target = random_floats(rng, n, -2.0f, 2.0f);
    pred[bad.at] = fmt.narrow(bad.pred);
    target[bad.at] = bad.target;
    run(pred, target, std::string("mse with ") + bad.name, 0.0);
  }
}

// MSE's gradient: the same FP32 operations in the same order on both sides
// (coef = 2 * scale / count, coef * (pred - target), one rounding): bitwise.
TEST_P(LossOps, MseBackwardIsTheCpusRounding) {
  SCOPED_TRACE(seed_text());
  CpuBackend cpu(1, precision());
  for (const size_t n : {size_t{1}, size_t{257}, size_t{4099}}) {
    std::vector<lowp16> pred = fmt.random(rng, n, -2.0f, 2.0f);
    std::vector<float> target = random_floats(rng, n, -2.0f, 2.0f);
    if (n > 3) {
      pred[1] = fmt.narrow(kInf);
      target[2] = NAN;
      pred[n - 1].bits = fmt.max_bits();
      target[n - 1] = -fmt.widen(lowp16{fmt.max_bits()});  // 2 * max: past FP32's range in BF16
    }
    const float scale = 512.0f;
    std::vector<lowp16> want(n);
    cpu.mse_backward(pred.data(), target.data(), 1, static_cast<int>(n), scale, want.data());
    DeviceArray<lowp16> d_pred(pred);
    DeviceArray<float> d_target(target);
    DeviceArray<float> d_scale(std::vector<float>{scale});
    for (const bool scale_on_device : {false, true}) {
      DeviceArray<lowp16> d_grad(LowpFormat::poison(n));
      launch_mse_backward(nullptr, precision(), d_pred.get(), d_target.get(), n,
                          scale_on_device ? ScalarArg::at(d_scale.get()) : ScalarArg(scale), d_grad.get());
      expect_same_bits(fmt, d_grad.download(), want,
                       "mse backward of " + std::to_string(n) + (scale_on_device ? ", scale on the device" : ""));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, LossOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
