// cuda_transformer.cu: LayerNorm forward/backward, the residual add and the
// head permutes (cuda_transformer.h), with the per-element math of
// transformer_math.h.
//
// LayerNorm works one warp per row (C is 128..1600 for GPT-2 sizes: a row
// is a few KB, read from cache after the first pass): FP32 sums by lane, then
// a butterfly, so every lane has the row's statistics and the order is fixed.
// The parameter gradients are column sums over all rows: each thread sums
// kLayerNormRowsPerChunk rows of one column in order into a partial, a
// second kernel adds the partials chunk by chunk (and the old value when
// accumulating) and rounds once. Deterministic; not the CPU's sequential
// order, so equal to the CPU within the FP32 summation tolerance.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_transformer.h"
#include "kernels/error.h"
#include "kernels/transformer_math.h"

namespace ddp {
namespace {

constexpr int kWarpsPerBlock = static_cast<int>(kThreadsPerBlock / 32);

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

// No __restrict__: y may be a or b.
template <class C>
__global__ void add_kernel(const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  for (size_t i = global_thread_index(); i < count; i += grid_stride())
    y[i] = C::narrow(C::widen(a[i]) + C::widen(b[i]));
}

// Element (b, h, t, d) of the heads layout <-> (b*T + t, h*hs + d) of rows.
struct HeadIndex {
  int seq_len, heads, head_size, row_stride;
  __device__ size_t row_offset(size_t head_element) const {
    const size_t d = head_element % head_size, t = (head_element / head_size) % seq_len;
    const size_t h = (head_element / (static_cast<size_t>(head_size) * seq_len)) % heads;
    const size_t b = head_element / (static_cast<size_t>(head_size) * seq_len * heads);
    return (b * seq_len + t) * row_stride + h * head_size + d;
  }
};

__global__ void rows_to_heads_kernel(const lowp16* rows, HeadIndex ix, size_t count, lowp16* heads_out) {
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) heads_out[i] = rows[ix.row_offset(i)];
}

__global__ void heads_to_rows_kernel(const lowp16* heads_in, HeadIndex ix, size_t count, lowp16* rows) {
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) rows[ix.row_offset(i)] = heads_in[i];
}

int chunks_for(int rows) { return static_cast<int>(blocks_for(rows, kLayerNormRowsPerChunk)); }

}  // namespace

void launch_layernorm_forward_lowp(cudaStream_t stream, Precision p, const lowp16* x, const lowp16* gamma,
                                   const lowp16* beta, int rows, int cols, float eps, lowp16* y, float* mean,
                                   float* rstd) {
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_forward_lowp: needs cols > 0");
  if (rows == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<layernorm_forward_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, stream}, x, gamma, beta, rows,
                                               cols, eps, y, mean, rstd);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

size_t layernorm_backward_scratch_bytes(int rows, int cols) {
  return 2 * static_cast<size_t>(chunks_for(rows)) * static_cast<size_t>(cols) * sizeof(float);
}

void launch_layernorm_backward_lowp(cudaStream_t stream, Precision p, const lowp16* dy, const lowp16* x,
                                    const lowp16* gamma, const float* mean, const float* rstd, int rows, int cols,
                                    lowp16* dx, bool accumulate_dx, lowp16* dgamma, lowp16* dbeta,
                                    bool accumulate_params, void* scratch) {
  DDP_REQUIRE(rows >= 0 && cols > 0, "layernorm_backward_lowp: needs cols > 0");
  const int chunks = chunks_for(rows);
  DDP_REQUIRE(chunks <= 65535, "layernorm_backward_lowp: more than 4M rows");  // gridDim.y
  auto* partials = static_cast<float*>(scratch);
  // The parameter sums read dy before the dx kernel may overwrite it (dx == dy).
  if (chunks > 0) {
    const dim3 grid(blocks_for(cols, 128), static_cast<unsigned>(chunks));
    with_codec(p, [&](auto codec) {
      using C = decltype(codec);
      launch_kernel<layernorm_param_partials_kernel<C>>({grid, 128, 0, stream}, dy, x, mean, rstd, rows, cols,
                                                        partials);
    });
    DDP_CUDA_CHECK_LAUNCH();
  }
  // chunks == 0 (no rows) still writes dgamma/dbeta: 0, or their old values.
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<layernorm_param_finish_kernel<C>>({grid_for(static_cast<size_t>(cols)), kThreadsPerBlock, 0, stream},
                                                    partials, chunks, cols, dgamma, dbeta, accumulate_params);
  });
  DDP_CUDA_CHECK_LAUNCH();
  if (rows == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<layernorm_dx_kernel<C>>({row_blocks(rows), kThreadsPerBlock, 0, stream}, dy, x, gamma, mean, rstd,
                                          rows, cols, dx, accumulate_dx);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_add_lowp(cudaStream_t stream, Precision p, const lowp16* a, const lowp16* b, lowp16* y, size_t count) {
  if (count == 0) return;
  with_codec(p, [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<add_kernel<C>>({grid_for(count), kThreadsPerBlock, 0, stream}, a, b, y, count);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_rows_to_heads_lowp(cudaStream_t stream, const lowp16* rows, int row_stride, int batch, int seq_len,
                               int heads, int head_size, lowp16* heads_out) {
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && heads >= 0 && head_size >= 0 && row_stride >= heads * head_size,
              "rows_to_heads_lowp: bad shape");
  const size_t count = static_cast<size_t>(batch) * heads * seq_len * head_size;
  if (count == 0) return;
  launch_kernel<rows_to_heads_kernel>({grid_for(count), kThreadsPerBlock, 0, stream}, rows,
                                      HeadIndex{seq_len, heads, head_size, row_stride}, count, heads_out);
  DDP_CUDA_CHECK_LAUNCH();
}

void launch_heads_to_rows_lowp(cudaStream_t stream, const lowp16* heads_in, int batch, int seq_len, int heads,
                               int head_size, lowp16* rows, int row_stride) {
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && heads >= 0 && head_size >= 0 && row_stride >= heads * head_size,
              "heads_to_rows_lowp: bad shape");
  const size_t count = static_cast<size_t>(batch) * heads * seq_len * head_size;
  if (count == 0) return;
  launch_kernel<heads_to_rows_kernel>({grid_for(count), kThreadsPerBlock, 0, stream}, heads_in,
                                      HeadIndex{seq_len, heads, head_size, row_stride}, count, rows);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
