// causal_softmax.h: the explicit attention path's masked softmax over
// [batch_heads, T, T] scores, forward and backward. FP32 max, exp and sum
// per row, one rounding per 16-bit output; the per-element math is
// transformer_math.h, shared by both rows.
#pragma once

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// probs[z, i, j] = fp16(softmax over j <= i of scale * scores[z, i, j]),
// exactly 0 for j > i. probs may be scores.
struct CausalSoftmaxForward {
  static constexpr const char* kName = "causal_softmax_forward_lowp";
  const lowp16* scores = nullptr;  // [batch_heads, T, T]
  int batch_heads = 0;
  int seq_len = 0;
  float scale = 1.0f;
  lowp16* probs = nullptr;  // [batch_heads, T, T]
};
void causal_softmax_forward_lowp_cpu(CpuBackend& cpu, const CausalSoftmaxForward& op);
void causal_softmax_forward_lowp_cuda(CudaOpContext& cuda, const CausalSoftmaxForward& op);
inline void causal_softmax_forward_lowp(Backend& backend, const CausalSoftmaxForward& op) {
  run_op(backend, op, causal_softmax_forward_lowp_cpu, DDP_CUDA_ROW(causal_softmax_forward_lowp_cuda));
}

// dscores = fp16(scale * p * (dp - sum_{j<=i} p dp)) for j <= i, exactly 0
// for j > i (transformer_math.h: causal_softmax_grad), from the 16-bit
// probabilities the forward wrote. dscores may be dprobs.
struct CausalSoftmaxBackward {
  static constexpr const char* kName = "causal_softmax_backward_lowp";
  const lowp16* probs = nullptr;   // [batch_heads, T, T]
  const lowp16* dprobs = nullptr;  // [batch_heads, T, T]
  int batch_heads = 0;
  int seq_len = 0;
  float scale = 1.0f;
  lowp16* dscores = nullptr;  // [batch_heads, T, T]
};
void causal_softmax_backward_lowp_cpu(CpuBackend& cpu, const CausalSoftmaxBackward& op);
void causal_softmax_backward_lowp_cuda(CudaOpContext& cuda, const CausalSoftmaxBackward& op);
inline void causal_softmax_backward_lowp(Backend& backend, const CausalSoftmaxBackward& op) {
  run_op(backend, op, causal_softmax_backward_lowp_cpu, DDP_CUDA_ROW(causal_softmax_backward_lowp_cuda));
}

}  // namespace ddp
