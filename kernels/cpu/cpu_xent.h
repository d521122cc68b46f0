// cpu_xent.h: softmax cross-entropy over rows of FP16 logits on the CPU
// (loss_ops.h): the loss, its gradient, and the chunked classifier's fused
// step that gives each row the bits of the two unfused calls.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_thread_pool.h"
#include "kernels/lowp_codec.h"

namespace ddp::cpu {

// Per-row results of softmax_xent_forward before they are summed.
struct XentScratch {
  std::vector<float> row_loss;
  std::vector<int32_t> row_correct;
};

void softmax_xent_forward(Precision p, CpuThreadPool& pool, XentScratch& scratch, const lowp16* logits,
                          const int32_t* labels, int rows, int cols, int real_cols, float* loss_mean,
                          int32_t* correct_count);
void softmax_xent_backward(Precision p, CpuThreadPool& pool, const lowp16* logits, const int32_t* labels, int rows,
                           int cols, int real_cols, float loss_scale, lowp16* dlogits);
void softmax_xent_fused_rows(Precision p, CpuThreadPool& pool, lowp16* logits_to_grad, const int32_t* labels, int rows,
                             int cols, int real_cols, int total_rows, float loss_scale, float* row_loss);
// The mean of row_loss [rows]: a float sum in row order on one thread, so
// the bits never depend on how the rows were split.
float loss_rows_mean(const float* row_loss, int rows);

}  // namespace ddp::cpu
