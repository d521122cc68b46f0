// cuda_elementwise.cu: the column sums (a GEMM's bias gradient where
// cuBLASLt cannot write it) and the check that this binary holds a kernel
// image for the device.
#include "kernels/cuda/cuda_elementwise.h"

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/error.h"

namespace ddp {
namespace {

// Column sums of a strided [rows, cols] matrix, element (r, c) at
// a[r * row_stride + c * col_stride]: a block covers 32 adjacent columns
// (coalesced reads along a row when col_stride is 1); its kBiasGradRowLanes
// thread rows stride over the matrix rows, then the per-thread FP32 partials
// are added in a fixed order. Deterministic, but not the CPU's sequential
// order: results agree to the FP32 summation-order tolerance, not bitwise.
constexpr int kBiasGradRowLanes = 16;

template <class C>
__global__ void column_sums_kernel(const lowp16* a, int rows, int cols, size_t row_stride, size_t col_stride,
                                   lowp16* db, bool accumulate) {
  __shared__ float partial[kBiasGradRowLanes][33];  // +1: no bank conflicts on the column read
  const int col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (col < cols)
    for (int r = threadIdx.y; r < rows; r += kBiasGradRowLanes)
      sum += C::widen(a[static_cast<size_t>(r) * row_stride + static_cast<size_t>(col) * col_stride]);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < kBiasGradRowLanes; ++lane) total += partial[lane][threadIdx.x];
    if (accumulate) total += C::widen(db[col]);
    db[col] = C::narrow(total);
  }
}

}  // namespace

void launch_column_sums_lowp(cudaStream_t stream, Precision p, const lowp16* a, int rows, int cols, size_t row_stride,
                             size_t col_stride, lowp16* db, bool accumulate) {
  DDP_REQUIRE(rows >= 0 && cols >= 0, "column_sums_lowp: negative shape");
  if (cols == 0) return;
  // rows == 0 still runs: db becomes 0 (or stays db when accumulating).
  const dim3 block(32, kBiasGradRowLanes);
  const dim3 grid(blocks_for(cols, 32));
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<column_sums_kernel<C>>({grid, block, 0, stream}, a, rows, cols, row_stride, col_stride, db,
                                         accumulate);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void check_kernel_image_for_current_device() {
  cudaFuncAttributes attributes{};
  const cudaError_t e =
      cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&column_sums_kernel<Fp16Codec>));
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  int device = 0, major = 0, minor = 0;
  DDP_CUDA_CHECK(cudaGetDevice(&device));
  DDP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DDP_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  throw Error("CUDA device " + std::to_string(device) + " (compute capability " + std::to_string(major) + "." +
              std::to_string(minor) + ") cannot run this build's kernels (" + cuda_error_text(e) +
              "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(major) + std::to_string(minor) +
              ", or use the CPU backend");
}

}  // namespace ddp
