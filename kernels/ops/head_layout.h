// head_layout.h: the split of attention's rows into heads and the merge
// back (B = batch, T = seq_len, nh = heads, hs = head_size). Copies: exact,
// the same bits on both rows.
#pragma once

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// heads[b, h, t, d] = rows[(b*T + t) * row_stride + h*hs + d], rows viewed
// as [B, T, row_stride] of which the first nh*hs columns are read (point at
// q, k or v inside qkv [B, T, 3C] with row_stride 3C). Also the backward
// of heads_to_rows_lowp.
struct RowsToHeads {
  static constexpr const char* kName = "rows_to_heads_lowp";
  const lowp16* rows = nullptr;  // [B, T, row_stride]
  int row_stride = 0;            // >= heads * head_size
  int batch = 0;
  int seq_len = 0;
  int heads = 0;
  int head_size = 0;
  lowp16* heads_out = nullptr;  // [B, nh, T, hs]
};
void rows_to_heads_lowp_cpu(CpuBackend& cpu, const RowsToHeads& op);
void rows_to_heads_lowp_cuda(CudaOpContext& cuda, const RowsToHeads& op);
inline void rows_to_heads_lowp(Backend& backend, const RowsToHeads& op) {
  run_op(backend, op, rows_to_heads_lowp_cpu, DDP_CUDA_ROW(rows_to_heads_lowp_cuda));
}

// The inverse: rows[(b*T + t) * row_stride + h*hs + d] = heads[b, h, t, d];
// columns of rows past nh*hs are not touched. The attention output
// [B, nh, T, hs] -> [B, T, C], and the backward of the split (dq, dk, dv
// into dqkv).
struct HeadsToRows {
  static constexpr const char* kName = "heads_to_rows_lowp";
  const lowp16* heads_in = nullptr;  // [B, nh, T, hs]
  int batch = 0;
  int seq_len = 0;
  int heads = 0;
  int head_size = 0;
  lowp16* rows = nullptr;  // [B, T, row_stride]
  int row_stride = 0;      // >= heads * head_size
};
void heads_to_rows_lowp_cpu(CpuBackend& cpu, const HeadsToRows& op);
void heads_to_rows_lowp_cuda(CudaOpContext& cuda, const HeadsToRows& op);
inline void heads_to_rows_lowp(Backend& backend, const HeadsToRows& op) {
  run_op(backend, op, heads_to_rows_lowp_cpu, DDP_CUDA_ROW(heads_to_rows_lowp_cuda));
}

}  // namespace ddp
