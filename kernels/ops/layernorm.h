// layernorm.h: LayerNorm over the rows of a [rows, cols] 16-bit matrix
// (nn.LayerNorm), forward and backward. FP32 arithmetic inside, one
// rounding per 16-bit output; every reduction in an order fixed by the
// shapes (no atomics), so each row gives the same bits run to run. The
// per-element math is transformer_math.h, shared by both rows.
#pragma once

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"
#include "kernels/transformer_math.h"

namespace ddp {

// y[r, :] = fp16((x[r, :] - mean_r) * rstd_r * gamma + beta), mean_r and the
// biased variance in FP32 over the row, rstd_r = 1/sqrt(var + eps). mean
// and rstd are kept for the backward.
struct LayerNormForward {
  static constexpr const char* kName = "layernorm_forward_lowp";
  const lowp16* x = nullptr;      // [rows, cols]
  const lowp16* gamma = nullptr;  // [cols]
  const lowp16* beta = nullptr;   // [cols]
  int rows = 0;
  int cols = 0;  // > 0
  float eps = kLayerNormEps;
  lowp16* y = nullptr;    // [rows, cols]
  float* mean = nullptr;  // [rows]
  float* rstd = nullptr;  // [rows]
};
void layernorm_forward_lowp_cpu(CpuBackend& cpu, const LayerNormForward& op);
void layernorm_forward_lowp_cuda(CudaOpContext& cuda, const LayerNormForward& op);
inline void layernorm_forward_lowp(Backend& backend, const LayerNormForward& op) {
  run_op(backend, op, layernorm_forward_lowp_cpu, DDP_CUDA_ROW(layernorm_forward_lowp_cuda));
}

// dx = fp16(LayerNorm's input gradient (transformer_math.h: layernorm_dx),
// plus dx's own value when accumulate_dx: the residual stream's gradient
// the block's output already put there); dgamma[c] = fp16(sum_r dy xhat),
// dbeta[c] = fp16(sum_r dy), plus their 16-bit values when
// accumulate_params; FP32 column sums in an order fixed by rows (CPU: in
// row order; CUDA: chunks of kLayerNormRowsPerChunk rows, then the chunks
// in order, so the two agree to FP32's summation tolerance).
struct LayerNormBackward {
  static constexpr const char* kName = "layernorm_backward_lowp";
  const lowp16* dy = nullptr;     // [rows, cols]
  const lowp16* x = nullptr;      // [rows, cols]
  const lowp16* gamma = nullptr;  // [cols]
  const float* mean = nullptr;    // [rows], the forward's
  const float* rstd = nullptr;    // [rows], the forward's
  int rows = 0;
  int cols = 0;          // > 0
  lowp16* dx = nullptr;  // [rows, cols]
  bool accumulate_dx = false;
  lowp16* dgamma = nullptr;  // [cols]
  lowp16* dbeta = nullptr;   // [cols]
  bool accumulate_params = false;
};
void layernorm_backward_lowp_cpu(CpuBackend& cpu, const LayerNormBackward& op);
void layernorm_backward_lowp_cuda(CudaOpContext& cuda, const LayerNormBackward& op);
inline void layernorm_backward_lowp(Backend& backend, const LayerNormBackward& op) {
  run_op(backend, op, layernorm_backward_lowp_cpu, DDP_CUDA_ROW(layernorm_backward_lowp_cuda));
}

}  // namespace ddp
