// test_column_sums.cpp: cuda_elementwise.cu's strided column sums (a GEMM's
// bias gradient where cuBLASLt cannot write it) against the CPU's bias
// gradient loop, FP16 and BF16 (op_test_support.h).
#include <string>
#include <vector>

#include "kernels/cpu/cpu_elementwise.h"
#include "kernels/cuda/cuda_elementwise.h"
#include "kernels/ops/op_test_support.h"

namespace ddp::test {
namespace {

using ColumnSums = OpTest;

// Column sums of a [rows, cols] matrix read with row and column strides (the
// transposed read too), written or accumulated: the CPU's bias gradient
// (bias_grad_columns, row-major) on the matrix copied contiguous.
TEST_P(ColumnSums, MatchTheCpuBiasGradient) {
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

INSTANTIATE_TEST_SUITE_P(Precisions, ColumnSums, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
