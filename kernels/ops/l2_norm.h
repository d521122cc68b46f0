// l2_norm.h: the L2 norm of an FP32 vector, for gradient clipping.
#pragma once

#include <cstddef>

#include "kernels/ops/op_dispatch.h"

namespace ddp {

// *norm = sqrt(sum x^2) with FP64 accumulation (CPU: in order; CUDA: the
// two-pass deterministic sum of cuda_common.cuh), rounded once to FP32;
// Inf and NaN propagate. count 0 writes 0.
struct L2NormFp32 {
  static constexpr const char* kName = "l2_norm_fp32";
  const float* x = nullptr;  // [count]
  size_t count = 0;
  float* norm = nullptr;  // one float of the backend's memory
};
void l2_norm_fp32_cpu(CpuBackend& cpu, const L2NormFp32& op);
void l2_norm_fp32_cuda(CudaOpContext& cuda, const L2NormFp32& op);
inline void l2_norm_fp32(Backend& backend, const L2NormFp32& op) {
  run_op(backend, op, l2_norm_fp32_cpu, DDP_CUDA_ROW(l2_norm_fp32_cuda));
}

}  // namespace ddp
