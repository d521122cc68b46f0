// cuda_loss.h: launchers for the loss kernels (softmax cross-entropy, MSE),
// FP32 math from 16-bit predictions (in precision p); semantics as the Backend methods of the
// same name (backend.h). Outputs (loss, count) are device pointers; the
// reductions need device scratch of the stated size, owned by the caller.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/lowp_codec.h"
#include "kernels/step_status.h"

namespace ddp {

size_t softmax_xent_forward_scratch_bytes(int rows);
// Rows of `cols` logits of which the first real_cols are classes (the
// padded cross-entropy of backend.h; real_cols == cols: the plain one). A
// label outside [0, real_cols) makes that row's loss NaN (so the mean is
// NaN) and the row not correct: a kernel cannot throw, and NaN cannot go
// unseen.
void launch_softmax_xent_forward(cudaStream_t stream, Precision p, const lowp16* logits, const int32_t* labels,
                                 int rows, int cols, int real_cols, float* loss_mean, int32_t* correct_count,
                                 void* scratch);
// An out-of-range label gives that row NaN gradients; padded columns get 0.
void launch_softmax_xent_backward(cudaStream_t stream, Precision p, const lowp16* logits, const int32_t* labels,
                                  int rows, int cols, int real_cols, ScalarArg loss_scale, lowp16* dlogits);

// The chunked classifier's fused step (backend.h); logits_to_grad becomes the gradient.
void launch_softmax_xent_fused_rows(cudaStream_t stream, Precision p, lowp16* logits_to_grad, const int32_t* labels,
                                    int rows, int cols, int real_cols, int total_rows, ScalarArg loss_scale,
                                    float* row_loss);
// The mean of row_loss [rows], as launch_softmax_xent_forward's.
void launch_loss_rows_mean(cudaStream_t stream, const float* row_loss, int rows, float* loss_mean);

size_t mse_forward_scratch_bytes();
void launch_mse_forward(cudaStream_t stream, Precision p, const lowp16* pred, const float* target, size_t count,
                        float* loss_mean, void* scratch);
void launch_mse_backward(cudaStream_t stream, Precision p, const lowp16* pred, const float* target, size_t count,
                         ScalarArg loss_scale, lowp16* dpred);

}  // namespace ddp
