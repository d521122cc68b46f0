// gemm_cuda.cu: the CUDA rows of the GEMM ops (gemm.h): cuBLASLt's plans
// with their epilogues, or the CUDA-core fallback kernels where cuBLASLt
// offers no plan, both behind CublasLtGemm (cuda/cuda_gemm.h), which the
// context hands over told whether a capture is under way.
#include "kernels/ops/gemm.h"

#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_op_context.h"

namespace ddp {

void gemm_lowp_cuda(CudaOpContext& cuda, const GemmLowp& op) { cuda.cublaslt_gemm().run(op, cuda.stream()); }

void gemm_lowp_to_fp32_cuda(CudaOpContext& cuda, const GemmLowpToFp32& op) {
  cuda.cublaslt_gemm().run_to_fp32(op.gemm, op.c_fp32, cuda.stream());
}

void gemm_batched_lowp_cuda(CudaOpContext& cuda, const GemmBatchedLowp& op) {
  cuda.cublaslt_gemm().run_batched(op.gemm, op.batch_count, op.stride_a, op.stride_b, op.stride_c, cuda.stream());
}

}  // namespace ddp
