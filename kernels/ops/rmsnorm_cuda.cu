// rmsnorm_cuda.cu: the CUDA rows of RMSNorm (rmsnorm.h), with its shared
// per-element math.
//
// LayerNorm's scheme (layernorm_cuda.cu). The forward and dx work one warp
// per row: FP32 sums by lane (lane l takes columns l, l + 32, ...), then a
// butterfly (warp_all_sum), so every lane has the row's statistics and the
// order is fixed by cols. The rows are a grid-stride loop over a capped grid
// (grid_for's cap), so any row count runs. The weight gradient is a column
// sum over all rows: each thread sums kRmsNormRowsPerChunk rows of one
// column in order into a partial in the context's scratch, a second kernel
// adds the partials chunk by chunk (and the old value when accumulating) and
// rounds once. Deterministic; not the CPU's sequential order, so equal to
// the CPU within the FP32 summation tolerance.
#include "kernels/ops/rmsnorm.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr int kWarpsPerBlock = static_cast<int>(kThreadsPerBlock / 32);
// gridDim.y's limit: past it the chunk loop strides.
constexpr size_t kMaxGridY = 65535;

// Blocks of kWarpsPerBlock rows, capped: the kernels stride over the rest.
unsigned row_blocks(int rows) {
  return static_cast<unsigned>(std::min<size_t>(blocks_for(rows, kWarpsPerBlock), kMaxGridBlocks));
}

int chunks_for(int rows) { return static_cast<int>(blocks_for(rows, kRmsNormRowsPerChunk)); }

// One warp per row; a warp's rows are uniform across its lanes, so the
// butterfly always has all 32.
template <class C>
__global__ void rmsnorm_forward_kernel(const lowp16* x, const lowp16* weight, int rows, int cols, float eps, lowp16* y,
                                       float* rstd) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const long long first =
      static_cast<long long>(blockIdx.x) * kWarpsPerBlock + static_cast<long long>(threadIdx.x / 32);
  const long long stride = static_cast<long long>(gridDim.x) * kWarpsPerBlock;
  for (long long row = first; row < rows; row += stride) {
    const size_t offset = static_cast<size_t>(row) * static_cast<size_t>(cols);
    const lowp16* xr = x + offset;
    float sum_sq = 0.0f;
    for (int c = lane; c < cols; c += 32) {
      const float v = C::widen(xr[c]);
      sum_sq += v * v;
    }
    const float rs = rmsnorm_rstd(warp_all_sum(sum_sq) / static_cast<float>(cols), eps);
    lowp16* yr = y + offset;
    for (int c = lane; c < cols; c += 32)
      yr[c] = rmsnorm_output<C>(C::widen(weight[c]), rmsnorm_hidden<C>(C::widen(xr[c]), rs));
    if (lane == 0) rstd[row] = rs;
  }
}

template <class C>
__global__ void rmsnorm_dx_kernel(const lowp16* dy, const lowp16* x, const lowp16* weight, const float* rstd, int rows,
                                  int cols, lowp16* dx, bool accumulate_dx) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const long long first =
      static_cast<long long>(blockIdx.x) * kWarpsPerBlock + static_cast<long long>(threadIdx.x / 32);
  const long long stride = static_cast<long long>(gridDim.x) * kWarpsPerBlock;
  for (long long row = first; row < rows; row += stride) {
    const size_t offset = static_cast<size_t>(row) * static_cast<size_t>(cols);
    const float rs = rstd[row];
    float sum_gx = 0.0f;
    for (int c = lane; c < cols; c += 32) {
      const float g = C::widen(dy[offset + c]) * C::widen(weight[c]);
      sum_gx += g * rmsnorm_xhat(C::widen(x[offset + c]), rs);
    }
    const float mean_gx = warp_all_sum(sum_gx) / static_cast<float>(cols);
    for (int c = lane; c < cols; c += 32) {
      const float g = C::widen(dy[offset + c]) * C::widen(weight[c]);
      const float d = rmsnorm_dx(g, rmsnorm_xhat(C::widen(x[offset + c]), rs), mean_gx, rs);
      dx[offset + c] = C::narrow(accumulate_dx ? C::widen(dx[offset + c]) + d : d);
    }
  }
}

// partials[chunk, c]: sum over the chunk's rows, in increasing row order, of
// dy * h (h recomputed as the forward rounded it). Chunks stride over
// gridDim.y, columns are one thread each.
template <class C>
__global__ void rmsnorm_weight_partials_kernel(const lowp16* dy, const lowp16* x, const float* rstd, int rows, int cols,
                                               int chunks, float* partials) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  for (int chunk = static_cast<int>(blockIdx.y); chunk < chunks; chunk += static_cast<int>(gridDim.y)) {
    const int r0 = chunk * kRmsNormRowsPerChunk;
    const int r1 = rows - r0 < kRmsNormRowsPerChunk ? rows : r0 + kRmsNormRowsPerChunk;  // no int overflow
    float sum = 0.0f;
    for (int r = r0; r < r1; ++r) {
      const size_t at = static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c);
      sum += C::widen(dy[at]) * C::widen(rmsnorm_hidden<C>(C::widen(x[at]), rstd[r]));
    }
    partials[static_cast<size_t>(chunk) * static_cast<size_t>(cols) + static_cast<size_t>(c)] = sum;
  }
}

template <class C>
__global__ void rmsnorm_weight_finish_kernel(const float* partials, int chunks, int cols, lowp16* dweight,
                                             bool accumulate) {
  // Grid-stride: the grid is capped (grid_for), cols need not be.
  for (size_t c = global_thread_index(); c < static_cast<size_t>(cols); c += grid_stride()) {
    float sum = 0.0f;
    for (int k = 0; k < chunks; ++k) sum += partials[static_cast<size_t>(k) * static_cast<size_t>(cols) + c];
    dweight[c] = C::narrow(sum + (accumulate ? C::widen(dweight[c]) : 0.0f));
  }
}

}  // namespace

void rmsnorm_forward_lowp_cuda(CudaOpContext& cuda, const RmsNormForward& op) {
  const int rows = op.rows, cols = op.cols;
  DDP_REQUIRE(rows >= 0 && cols > 0, "rmsnorm_forward_lowp: needs rows >= 0 and cols > 0");
  if (rows == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<rmsnorm_forward_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, cuda.stream()}, op.x, op.weight,
                                             rows, cols, op.eps, op.y, op.rstd);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward_lowp_cuda(CudaOpContext& cuda, const RmsNormBackward& op) {
  const int rows = op.rows, cols = op.cols;
  DDP_REQUIRE(rows >= 0 && cols > 0, "rmsnorm_backward_lowp: needs rows >= 0 and cols > 0");
  if (rows == 0) {  // no rows: the sums are 0 (LayerNorm's rule), dx has no rows
    if (!op.accumulate_weight)
      DDP_CUDA_CHECK(cudaMemsetAsync(op.dweight, 0, static_cast<size_t>(cols) * sizeof(lowp16), cuda.stream()));
    return;
  }
  const int chunks = chunks_for(rows);
  // The partials: [chunks, cols] floats.
  auto* partials =
      static_cast<float*>(cuda.scratch(static_cast<size_t>(chunks) * static_cast<size_t>(cols) * sizeof(float)));
  cudaStream_t stream = cuda.stream();
  const Precision p = cuda.precision();
  // Columns by blocks of 128; chunks on gridDim.y, capped (the kernel strides).
  const size_t chunk_blocks = std::min({static_cast<size_t>(chunks), kMaxGridY, kMaxGridBlocks});
  const dim3 chunk_grid(blocks_for(cols, 128), static_cast<unsigned>(chunk_blocks));
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<rmsnorm_weight_partials_kernel<C>>({chunk_grid, 128, 0, stream}, op.dy, op.x, op.rstd, rows, cols,
                                                     chunks, partials);
  });
  DDP_CUDA_CHECK_LAUNCH();
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<rmsnorm_weight_finish_kernel<C>>({grid_for(static_cast<size_t>(cols)), kThreadsPerBlock, 0, stream},
                                                   partials, chunks, cols, op.dweight, op.accumulate_weight);
  });
  DDP_CUDA_CHECK_LAUNCH();
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<rmsnorm_dx_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, stream}, op.dy, op.x, op.weight,
                                        op.rstd, rows, cols, op.dx, op.accumulate_dx);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
