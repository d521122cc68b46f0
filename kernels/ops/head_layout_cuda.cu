// head_layout_cuda.cu: the CUDA rows of the head permutes (head_layout.h):
// one thread per element of the heads layout, grid-stride, a copy.
#include "kernels/ops/head_layout.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

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

}  // namespace

void rows_to_heads_lowp_cuda(CudaOpContext& cuda, const RowsToHeads& op) {
  DDP_REQUIRE(op.batch >= 0 && op.seq_len >= 0 && op.heads >= 0 && op.head_size >= 0 &&
                  op.row_stride >= op.heads * op.head_size,
              "rows_to_heads_lowp: bad shape");
  const size_t count = static_cast<size_t>(op.batch) * op.heads * op.seq_len * op.head_size;
  if (count == 0) return;
  launch_kernel<rows_to_heads_kernel>({grid_for(count), kThreadsPerBlock, 0, cuda.stream()}, op.rows,
                                      HeadIndex{op.seq_len, op.heads, op.head_size, op.row_stride}, count,
                                      op.heads_out);
  DDP_CUDA_CHECK_LAUNCH();
}

void heads_to_rows_lowp_cuda(CudaOpContext& cuda, const HeadsToRows& op) {
  DDP_REQUIRE(op.batch >= 0 && op.seq_len >= 0 && op.heads >= 0 && op.head_size >= 0 &&
                  op.row_stride >= op.heads * op.head_size,
              "heads_to_rows_lowp: bad shape");
  const size_t count = static_cast<size_t>(op.batch) * op.heads * op.seq_len * op.head_size;
  if (count == 0) return;
  launch_kernel<heads_to_rows_kernel>({grid_for(count), kThreadsPerBlock, 0, cuda.stream()}, op.heads_in,
                                      HeadIndex{op.seq_len, op.heads, op.head_size, op.row_stride}, count, op.rows);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
