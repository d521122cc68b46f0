// layernorm_cuda.cu: the CUDA rows of LayerNorm (layernorm.h), with the
// per-element math of transformer_math.h.
//
// LayerNorm works one warp per row (C is 128..1600 for GPT-2 sizes: a row
// is a few KB, read from cache after the first pass): FP32 sums by lane, then
// a butterfly, so every lane has the row's statistics and the order is fixed.
// The parameter gradients are column sums over all rows: each thread sums
// kLayerNormRowsPerChunk rows of one column in order into a partial, a
// second kernel adds the partials chunk by chunk (and the old value when
// accumulating) and rounds once. Deterministic; not the CPU's sequential
// order, so equal to the CPU within the FP32 summation tolerance.
#include "kernels/ops/layernorm.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"
#include "kernels/transformer_math.h"

namespace ddp {
namespace {

constexpr int kWarpsPerBlock = static_cast<int>(kThreadsPerBlock / 32);
// Rows per partial sum of dgamma/dbeta (layernorm.h).
constexpr int kLayerNormRowsPerChunk = 64;

unsigned row_blocks(int rows) { return blocks_for(rows, kWarpsPerBlock); }

template <class C>
__global__ void layernorm_forward_kernel(const lowp16* x, const lowp16* gamma, const lowp16* beta, int rows, int cols,
                                         float eps, lowp16* y, float* mean, float* rstd) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  if (row >= rows) return;  // uniform per warp
  const lowp16* xr = x + static_cast<size_t>(row) * cols;
  float sum = 0.0f;
  for (int c = lane; c < cols; c += 32) sum += C::widen(xr[c]);
  const float m = warp_all_sum(sum) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    const float d = C::widen(xr[c]) - m;
    sq += d * d;
  }
  const float rs = layernorm_rstd(warp_all_sum(sq) / static_cast<float>(cols), eps);
  lowp16* yr = y + static_cast<size_t>(row) * cols;
  for (int c = lane; c < cols; c += 32)
    yr[c] = C::narrow(layernorm_output(layernorm_xhat(C::widen(xr[c]), m, rs), C::widen(gamma[c]), C::widen(beta[c])));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

template <class C>
__global__ void layernorm_dx_kernel(const lowp16* dy, const lowp16* x, const lowp16* gamma, const float* mean,
                                    const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  if (row >= rows) return;
  const size_t offset = static_cast<size_t>(row) * cols;
  const float m = mean[row], rs = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    const float g = C::widen(dy[offset + c]) * C::widen(gamma[c]);
    sum_g += g;
    sum_gx += g * layernorm_xhat(C::widen(x[offset + c]), m, rs);
  }
  const float mean_g = warp_all_sum(sum_g) / static_cast<float>(cols);
  const float mean_gx = warp_all_sum(sum_gx) / static_cast<float>(cols);
  // dy is read in full above before any lane writes dx: dx may equal dy.
  __syncwarp();
  for (int c = lane; c < cols; c += 32) {
    const float g = C::widen(dy[offset + c]) * C::widen(gamma[c]);
    const float d = layernorm_dx(g, layernorm_xhat(C::widen(x[offset + c]), m, rs), mean_g, mean_gx, rs);
    dx[offset + c] = C::narrow(accumulate_dx ? C::widen(dx[offset + c]) + d : d);
  }
}

// partial[chunk, c] (dgamma) and partial[chunks + chunk, c] (dbeta): the sums
// over the chunk's rows, in increasing row order.
template <class C>
__global__ void layernorm_param_partials_kernel(const lowp16* dy, const lowp16* x, const float* mean, const float* rstd,
                                                int rows, int cols, float* partials) {
  const int chunks = static_cast<int>(gridDim.y);
  const int chunk = static_cast<int>(blockIdx.y);
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  const int r0 = chunk * kLayerNormRowsPerChunk, r1 = min(rows, r0 + kLayerNormRowsPerChunk);
  float sum_gx = 0.0f, sum_g = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const size_t at = static_cast<size_t>(r) * cols + c;
    const float d = C::widen(dy[at]);
    sum_gx += d * layernorm_xhat(C::widen(x[at]), mean[r], rstd[r]);
    sum_g += d;
  }
  partials[static_cast<size_t>(chunk) * cols + c] = sum_gx;
  partials[static_cast<size_t>(chunks + chunk) * cols + c] = sum_g;
}

template <class C>
__global__ void layernorm_param_finish_kernel(const float* partials, int chunks, int cols, lowp16* dgamma,
                                              lowp16* dbeta, bool accumulate) {
  // Grid-stride: the grid is capped (grid_for), cols need not be.
  for (size_t c = global_thread_index(); c < static_cast<size_t>(cols); c += grid_stride()) {
    float sum_gx = 0.0f, sum_g = 0.0f;
    for (int k = 0; k < chunks; ++k) {
      sum_gx += partials[static_cast<size_t>(k) * cols + c];
      sum_g += partials[static_cast<size_t>(chunks + k) * cols + c];
    }
    dgamma[c] = C::narrow(sum_gx + (accumulate ? C::widen(dgamma[c]) : 0.0f));
    dbeta[c] = C::narrow(sum_g + (accumulate ? C::widen(dbeta[c]) : 0.0f));
  }
}

int chunks_for(int rows) { return static_cast<int>(blocks_for(rows, kLayerNormRowsPerChunk)); }

// The partials of dgamma and dbeta: [2, chunks, cols] floats.
size_t layernorm_backward_scratch_bytes(int rows, int cols) {
  return 2 * static_cast<size_t>(chunks_for(rows)) * static_cast<size_t>(cols) * sizeof(float);
}

}  // namespace

void layernorm_forward_lowp_cuda(CudaOpContext& cuda, const LayerNormForward& op) {
  const int rows = op.rows, cols = op.cols;
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_forward_lowp: needs cols > 0");
  if (rows == 0) return;
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<layernorm_forward_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, cuda.stream()}, op.x, op.gamma,
                                               op.beta, rows, cols, op.eps, op.y, op.mean, op.rstd);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void layernorm_backward_lowp_cuda(CudaOpContext& cuda, const LayerNormBackward& op) {
  const int rows = op.rows, cols = op.cols;
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_backward_lowp: needs cols > 0");
  const int chunks = chunks_for(rows);
  DDP_REQUIRE(chunks <= 65535, "layernorm_backward_lowp: more than 4M rows");  // gridDim.y
  auto* partials = static_cast<float*>(cuda.scratch(layernorm_backward_scratch_bytes(rows, cols)));
  cudaStream_t stream = cuda.stream();
  const Precision p = cuda.precision();
  // The parameter sums read dy before the dx kernel may overwrite it (dx == dy).
  if (chunks > 0) {
    const dim3 grid(blocks_for(cols, 128), static_cast<unsigned>(chunks));
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      launch_kernel<layernorm_param_partials_kernel<C>>({grid, 128, 0, stream}, op.dy, op.x, op.mean, op.rstd, rows,
                                                        cols, partials);
    });
    DDP_CUDA_CHECK_LAUNCH();
  }
  // chunks == 0 (no rows) still writes dgamma/dbeta: 0, or their old values.
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<layernorm_param_finish_kernel<C>>({grid_for(static_cast<size_t>(cols)), kThreadsPerBlock, 0, stream},
                                                    partials, chunks, cols, op.dgamma, op.dbeta, op.accumulate_params);
  });
  DDP_CUDA_CHECK_LAUNCH();
  if (rows == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<layernorm_dx_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, stream}, op.dy, op.x, op.gamma,
                                          op.mean, op.rstd, rows, cols, op.dx, op.accumulate_dx);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
