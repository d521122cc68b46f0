// elementwise.h: the 16-bit element-wise ops: FP32 math on each element,
// one round-to-nearest-even to the backend's 16-bit precision (fp16() below:
// FP16 or BF16 alike). Elements are independent, so any split over threads
// or blocks gives the same bits. The unfused passes the fused GEMM
// epilogues replaced (bias add, activation and its gradient, bias-gradient
// column sums) are not ops: the tests' references have them
// (tests/support/unfused_ops.h).
#pragma once

#include <cstddef>

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// dst[i] = fp16(src[i]): the FP32 masters' 16-bit copy.
struct CastFp32ToLowp {
  static constexpr const char* kName = "cast_fp32_to_lowp";
  const float* src = nullptr;
  lowp16* dst = nullptr;
  size_t count = 0;
};
void cast_fp32_to_lowp_cpu(CpuBackend& cpu, const CastFp32ToLowp& op);
void cast_fp32_to_lowp_cuda(CudaOpContext& cuda, const CastFp32ToLowp& op);
inline void cast_fp32_to_lowp(Backend& backend, const CastFp32ToLowp& op) {
  run_op(backend, op, cast_fp32_to_lowp_cpu, DDP_CUDA_ROW(cast_fp32_to_lowp_cuda));
}

// y[i] = fp16(a[i] + b[i]) (FP32 add): the residual add. y may equal a or b
// (y == a is the in-place accumulate x += f(x)).
struct AddLowp {
  static constexpr const char* kName = "add_lowp";
  const lowp16* a = nullptr;
  const lowp16* b = nullptr;
  lowp16* y = nullptr;
  size_t count = 0;
};
void add_lowp_cpu(CpuBackend& cpu, const AddLowp& op);
void add_lowp_cuda(CudaOpContext& cuda, const AddLowp& op);
inline void add_lowp(Backend& backend, const AddLowp& op) {
  run_op(backend, op, add_lowp_cpu, DDP_CUDA_ROW(add_lowp_cuda));
}

// y[i] = fp16(float(y[i]) + src[i]): an FP32 sum added to a 16-bit one with
// one rounding, as a GEMM with beta 1 adds its sum to C (the streamed
// classifier's d_wte under gradient accumulation).
struct AddFp32IntoLowp {
  static constexpr const char* kName = "add_fp32_into_lowp";
  const float* src = nullptr;
  lowp16* y = nullptr;
  size_t count = 0;
};
void add_fp32_into_lowp_cpu(CpuBackend& cpu, const AddFp32IntoLowp& op);
void add_fp32_into_lowp_cuda(CudaOpContext& cuda, const AddFp32IntoLowp& op);
inline void add_fp32_into_lowp(Backend& backend, const AddFp32IntoLowp& op) {
  run_op(backend, op, add_fp32_into_lowp_cpu, DDP_CUDA_ROW(add_fp32_into_lowp_cuda));
}

}  // namespace ddp
