// cpu_gemm.h: the CPU FP16 GEMM (GemmFp16 of backend.h). FP16 operands widen
// exactly to FP32, cblas_sgemm multiplies with FP32 sums, the bias is added
// in FP32 and the result rounds once to FP16 (RNE): the arithmetic contract
// of a Tensor Core GEMM.
//
// Large GEMMs are split over a CpuThreadPool: the widening passes by rows,
// then the output into one slice per thread (columns when A is the smaller
// operand, rows otherwise, so only the smaller one is packed twice), each
// slice a single-threaded cblas_sgemm followed by its own rounding pass.
// The split depends only on the shape and the team size, so a result is the
// same from run to run; like the BLAS's own threading, a different team size
// may change the last bit of a sum (the BLAS kernel's order depends on where
// a slice starts).
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu_thread_pool.h"

namespace ddp {

// Widened operands and the FP32 result, grown on demand and reused, so a
// training step allocates nothing.
struct CpuGemmScratch {
  std::vector<float> a_fp32, b_fp32, c_fp32, bias_fp32;
};

void cpu_gemm_fp16(const GemmFp16& g, CpuThreadPool& pool, CpuGemmScratch& scratch);

}  // namespace ddp
