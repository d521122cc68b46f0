// softmax_xent.h: softmax cross-entropy over rows of 16-bit logits: the
// loss (FP32, with the count of rows whose argmax is the label), its scaled
// 16-bit gradient, and the chunked classifier's fused step that gives each
// row the bits of the two unfused calls.
//
// Rows are [rows, cols] logits whose first real_cols columns are the
// classes (real_cols == cols: all; the GPT's vocabulary is padded to a
// multiple of 64 for the GEMMs, as llm.c). Padded columns never win the
// argmax, get no probability and a gradient of exactly 0. A label outside
// [0, real_cols) makes its row's loss (hence the mean) and its gradient row
// NaN and the row not correct: a kernel cannot throw, and NaN cannot go
// unseen. A row's statistics are FP32: its max, the first argmax (NaN the
// largest, as torch.argmax: argmax_math.h), the sum of exp(x - max).
#pragma once

#include <cstdint>

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"
#include "kernels/step_status.h"

namespace ddp {

// *loss_mean = mean_r [logsumexp(logits[r, :real_cols]) - logits[r, labels[r]]]
// (the row losses summed in row order: loss_rows_mean); *correct_count, if
// not null, = #rows whose argmax over the classes is the label. rows == 0
// writes 0 and 0.
struct SoftmaxXentForward {
  static constexpr const char* kName = "softmax_xent_forward";
  const lowp16* logits = nullptr;   // [rows, cols]
  const int32_t* labels = nullptr;  // [rows]
  int rows = 0;
  int cols = 0;
  int real_cols = 0;                 // the classes: 0 < real_cols <= cols
  float* loss_mean = nullptr;        // one float of the backend's memory
  int32_t* correct_count = nullptr;  // one int32 of the backend's memory, or null
};
void softmax_xent_forward_cpu(CpuBackend& cpu, const SoftmaxXentForward& op);
void softmax_xent_forward_cuda(CudaOpContext& cuda, const SoftmaxXentForward& op);
inline void softmax_xent_forward(Backend& backend, const SoftmaxXentForward& op) {
  run_op(backend, op, softmax_xent_forward_cpu, DDP_CUDA_ROW(softmax_xent_forward_cuda));
}

// dlogits = fp16(loss_scale * (softmax(logits) - onehot(labels)) / rows)
// over the classes (p = exp(x - max) * (1 / sum), then coef * (p - y), coef
// = loss_scale / rows in FP32), exactly 0 in padded columns. dlogits may be
// logits.
struct SoftmaxXentBackward {
  static constexpr const char* kName = "softmax_xent_backward";
  const lowp16* logits = nullptr;   // [rows, cols]
  const int32_t* labels = nullptr;  // [rows]
  int rows = 0;
  int cols = 0;
  int real_cols = 0;
  ScalarArg loss_scale = 1.0f;  // a value, or ScalarArg::at a float of the backend's memory
  lowp16* dlogits = nullptr;    // [rows, cols]
};
void softmax_xent_backward_cpu(CpuBackend& cpu, const SoftmaxXentBackward& op);
void softmax_xent_backward_cuda(CudaOpContext& cuda, const SoftmaxXentBackward& op);
inline void softmax_xent_backward(Backend& backend, const SoftmaxXentBackward& op) {
  run_op(backend, op, softmax_xent_backward_cpu, DDP_CUDA_ROW(softmax_xent_backward_cuda));
}

// The chunked classifier's step (trainer/models/layers/tied_classifier.h):
// for the rows [0, rows) of a chunk of a batch of total_rows rows, each
// row's loss into row_loss[r] (as softmax_xent_forward computes it) and its
// logits overwritten by their gradient (as softmax_xent_backward for
// total_rows rows: coef = loss_scale / total_rows), from one read of the
// row's logits. Each row gets the bits the two unfused calls give it.
struct SoftmaxXentFusedRows {
  static constexpr const char* kName = "softmax_xent_fused_rows";
  lowp16* logits_to_grad = nullptr;  // [rows, cols]: the logits in, their gradient out
  const int32_t* labels = nullptr;   // [rows]
  int rows = 0;
  int cols = 0;
  int real_cols = 0;
  int total_rows = 0;  // the batch's rows, >= rows
  ScalarArg loss_scale = 1.0f;
  float* row_loss = nullptr;  // [rows]
};
void softmax_xent_fused_rows_cpu(CpuBackend& cpu, const SoftmaxXentFusedRows& op);
void softmax_xent_fused_rows_cuda(CudaOpContext& cuda, const SoftmaxXentFusedRows& op);
inline void softmax_xent_fused_rows(Backend& backend, const SoftmaxXentFusedRows& op) {
  run_op(backend, op, softmax_xent_fused_rows_cpu, DDP_CUDA_ROW(softmax_xent_fused_rows_cuda));
}

// *loss_mean = the mean of row_loss [rows], summed in the order and
// precision softmax_xent_forward sums its rows, so the chunked loss is its
// bits (CPU: a float sum in row order; CUDA: a double sum by one block in
// a fixed tree). rows == 0 writes 0.
struct LossRowsMean {
  static constexpr const char* kName = "loss_rows_mean";
  const float* row_loss = nullptr;  // [rows]
  int rows = 0;
  float* loss_mean = nullptr;  // one float of the backend's memory
};
void loss_rows_mean_cpu(CpuBackend& cpu, const LossRowsMean& op);
void loss_rows_mean_cuda(CudaOpContext& cuda, const LossRowsMean& op);
inline void loss_rows_mean(Backend& backend, const LossRowsMean& op) {
  run_op(backend, op, loss_rows_mean_cpu, DDP_CUDA_ROW(loss_rows_mean_cuda));
}

}  // namespace ddp
