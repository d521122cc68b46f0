// test_elementwise_ops.cpp: cuda_elementwise.cu's kernels (the FP32 -> 16-bit
// cast, the FP32 add into a 16-bit tensor, the strided column sums) against
// the CPU loops, FP16 and BF16 (op_test_support.h).
#include <string>
#include <vector>

#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cuda/cuda_elementwise.h"
#include "kernels/ops/op_test_support.h"

namespace ddp::test {
namespace {

using ElementwiseOps = OpTest;

TEST_P(ElementwiseOps, CastFromFp32IsTheCpusRounding) {
  for (const size_t count : {size_t{1}, size_t{255}, size_t{257}, size_t{5000}}) {
    const std::vector<float> src = random_floats(rng, count, -70000.0f, 70000.0f);  // past FP16's range: Inf
    std::vector<lowp16> want(count);
    cpu::narrow_fp32(precision(), src.data(), want.data(), count);
    DeviceArray<float> d_src(src);
    DeviceArray<lowp16> d_dst(LowpFormat::poison(count));
    launch_cast_fp32_to_lowp(nullptr, precision(), d_src.get(), d_dst.get(), count);
    expect_same_bits(fmt, d_dst.download(), want, "cast, count " + std::to_string(count));
  }
}

TEST_P(ElementwiseOps, AddFp32IntoLowpIsOneRoundingOfTheSum) {
  const size_t count = 3001;
  const std::vector<float> src = random_floats(rng, count);
  const std::vector<lowp16> y = fmt.random(rng, count);
  std::vector<lowp16> want(count);
  for (size_t i = 0; i < count; ++i) want[i] = fmt.narrow(fmt.widen(y[i]) + src[i]);
  DeviceArray<float> d_src(src);
  DeviceArray<lowp16> d_y(y);
  launch_add_fp32_into_lowp(nullptr, precision(), d_src.get(), d_y.get(), count);
  expect_same_bits(fmt, d_y.download(), want, "add_fp32_into_lowp");
}

// Column sums of a [rows, cols] matrix read with row and column strides (the
// transposed read too), written or accumulated: the CPU's bias gradient
// (bias_grad_columns, row-major) on the matrix copied contiguous.
TEST_P(ElementwiseOps, ColumnSumsMatchTheCpuBiasGradient) {
  struct Shape {
    int rows, cols;
    bool transposed, accumulate;
  };
  for (const Shape s : {Shape{1, 1, false, false}, Shape{37, 33, false, true}, Shape{70, 65, true, false},
                        Shape{0, 5, false, true}, Shape{200, 3, true, true}}) {
    const size_t n = static_cast<size_t>(s.rows) * s.cols;
    const std::vector<lowp16> a = fmt.random(rng, n);  // stored [rows, cols], or [cols, rows] when transposed
    std::vector<lowp16> row_major(n);
    for (int r = 0; r < s.rows; ++r)
      for (int c = 0; c < s.cols; ++c)
        row_major[static_cast<size_t>(r) * s.cols + c] =
            s.transposed ? a[static_cast<size_t>(c) * s.rows + r] : a[static_cast<size_t>(r) * s.cols + c];
    const std::vector<lowp16> db_start = fmt.random(rng, static_cast<size_t>(s.cols));
    std::vector<lowp16> want = db_start;
    cpu::bias_grad_columns(precision(), row_major.data(), static_cast<size_t>(s.rows), static_cast<size_t>(s.cols), 0,
                           static_cast<size_t>(s.cols), want.data(), s.accumulate);
    DeviceArray<lowp16> d_a(a.empty() ? std::vector<lowp16>(1) : a);
    DeviceArray<lowp16> d_db(s.accumulate ? db_start : LowpFormat::poison(static_cast<size_t>(s.cols)));
    const size_t row_stride = s.transposed ? 1 : static_cast<size_t>(s.cols);
    const size_t col_stride = s.transposed ? static_cast<size_t>(s.rows) : 1;
    launch_column_sums_lowp(nullptr, precision(), d_a.get(), s.rows, s.cols, row_stride, col_stride, d_db.get(),
                            s.accumulate);
    // FP32 sums in another order (16 row lanes, then in lane order), one rounding.
    expect_close(fmt, d_db.download(), want, fmt.rel_tol(), fp32_order_rel_tol(static_cast<size_t>(s.rows)) * s.rows,
                 "column sums " + std::to_string(s.rows) + "x" + std::to_string(s.cols));
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, ElementwiseOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
