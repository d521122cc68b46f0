// cuda_elementwise.h: the launcher of the column sums of a GEMM's bias
// gradient, which queues one kernel on `stream` and checks the launch, and
// the kernel-image check. Plain C++: g++ can include it.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/elementwise_math.h"
#include "kernels/lowp_codec.h"

namespace ddp {

// FP32 column sums over a strided view, element (r, c) at
// a[r * row_stride + c * col_stride] (db[c] = sum_r, + db[c] when
// accumulating): also the bias gradient of a GEMM's op(A) where cuBLASLt's
// BGRADB cannot write it (launch_bias_grad_op_a_lowp). Reads coalesce when
// col_stride is 1.
void launch_column_sums_lowp(cudaStream_t stream, Precision p, const lowp16* a, int rows, int cols, size_t row_stride,
                             size_t col_stride, lowp16* db, bool accumulate);

// Throws ddp::Error with the fix ("rebuild with CMAKE_CUDA_ARCHITECTURES=..")
// when this binary holds no kernel image the current device can run.
void check_kernel_image_for_current_device();

}  // namespace ddp
