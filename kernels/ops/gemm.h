// gemm.h: the GEMM ops: one product with its fused epilogue (GemmLowp,
// gemm_lowp.h, where the contract is), the same product with its FP32 sums
// kept unrounded, and a batch of products at fixed strides. CPU: the
// operands widened to FP32, a real BLAS, one rounding (cpu/cpu_gemm.h).
// CUDA: cuBLASLt with its epilogues, or the CUDA-core kernels where it
// offers no plan (cuda/cuda_gemm.h). cuBLASLt is not emulated, so the CUDA
// rows run on a GPU only (tests/cuda/); the fallback kernels run under the
// SIMT executor (tests/kernels/ops/test_gemm_*.cpp).
#pragma once

#include <cstdint>

#include "kernels/gemm_lowp.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// C = epilogue(alpha * op(A) * op(B) + beta * C): GemmLowp is the op's
// argument struct.
void gemm_lowp_cpu(CpuBackend& cpu, const GemmLowp& op);
void gemm_lowp_cuda(CudaOpContext& cuda, const GemmLowp& op);
inline void gemm_lowp(Backend& backend, const GemmLowp& op) {
  run_op(backend, op, gemm_lowp_cpu, DDP_CUDA_ROW(gemm_lowp_cuda));
}

// c_fp32 [m, n] (row stride gemm.ldc) = alpha * op(A) * op(B) + beta *
// c_fp32: gemm_lowp's product with its FP32 sums kept in FP32, never
// rounded to 16 bits. No epilogue (bias, act, dact, pre_activation,
// bias_grad unset) and gemm.c unused (null). What the streamed classifier
// sums d_wte in over its chunks (tied_classifier.h): one rounding at the
// end instead of one per chunk. On the CPU the same BLAS call as gemm_lowp
// without the rounding, so fp16(c_fp32) with beta 0 is gemm_lowp's bits.
struct GemmLowpToFp32 {
  static constexpr const char* kName = "gemm_lowp_to_fp32";
  GemmLowp gemm;
  float* c_fp32 = nullptr;
};
void gemm_lowp_to_fp32_cpu(CpuBackend& cpu, const GemmLowpToFp32& op);
void gemm_lowp_to_fp32_cuda(CudaOpContext& cuda, const GemmLowpToFp32& op);
inline void gemm_lowp_to_fp32(Backend& backend, const GemmLowpToFp32& op) {
  run_op(backend, op, gemm_lowp_to_fp32_cpu, DDP_CUDA_ROW(gemm_lowp_to_fp32_cuda));
}

// gemm_lowp of `gemm` (no epilogue: bias, act, dact, pre_activation and
// bias_grad unset) on batch_count matrix triples, the i-th at a + i *
// stride_a, b + i * stride_b, c + i * stride_c (element strides): the
// per-head products Q K^T and P V and their gradients.
struct GemmBatchedLowp {
  static constexpr const char* kName = "gemm_batched_lowp";
  GemmLowp gemm;
  int batch_count = 0;
  int64_t stride_a = 0;
  int64_t stride_b = 0;
  int64_t stride_c = 0;
};
void gemm_batched_lowp_cpu(CpuBackend& cpu, const GemmBatchedLowp& op);
void gemm_batched_lowp_cuda(CudaOpContext& cuda, const GemmBatchedLowp& op);
inline void gemm_batched_lowp(Backend& backend, const GemmBatchedLowp& op) {
  run_op(backend, op, gemm_batched_lowp_cpu, DDP_CUDA_ROW(gemm_batched_lowp_cuda));
}

}  // namespace ddp
