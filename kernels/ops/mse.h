// mse.h: the mean squared error of 16-bit predictions against FP32
// targets (torch's MSELoss, 'mean' reduction) and its scaled 16-bit
// gradient, over rows * cols elements (the MLP's regression head).
#pragma once

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"
#include "kernels/step_status.h"

namespace ddp {

// *loss_mean = mean over rows * cols of (pred - target)^2; the squares are
// FP32 (the CPU sums them in FP32 in order, CUDA in FP64 by a fixed tree:
// the two agree to FP32's summation tolerance). rows * cols == 0 writes 0.
struct MseForward {
  static constexpr const char* kName = "mse_forward";
  const lowp16* pred = nullptr;   // [rows, cols]
  const float* target = nullptr;  // [rows, cols]
  int rows = 0;
  int cols = 0;
  float* loss_mean = nullptr;  // one float of the backend's memory
};
void mse_forward_cpu(CpuBackend& cpu, const MseForward& op);
void mse_forward_cuda(CudaOpContext& cuda, const MseForward& op);
inline void mse_forward(Backend& backend, const MseForward& op) {
  run_op(backend, op, mse_forward_cpu, DDP_CUDA_ROW(mse_forward_cuda));
}

// dpred = fp16(coef * (pred - target)), coef = 2 * loss_scale / (rows * cols)
// in FP32: the same float operations on both rows, so the same bits.
struct MseBackward {
  static constexpr const char* kName = "mse_backward";
  const lowp16* pred = nullptr;   // [rows, cols]
  const float* target = nullptr;  // [rows, cols]
  int rows = 0;
  int cols = 0;
  ScalarArg loss_scale = 1.0f;  // a value, or ScalarArg::at a float of the backend's memory
  lowp16* dpred = nullptr;      // [rows, cols]
};
void mse_backward_cpu(CpuBackend& cpu, const MseBackward& op);
void mse_backward_cuda(CudaOpContext& cuda, const MseBackward& op);
inline void mse_backward(Backend& backend, const MseBackward& op) {
  run_op(backend, op, mse_backward_cpu, DDP_CUDA_ROW(mse_backward_cuda));
}

}  // namespace ddp
