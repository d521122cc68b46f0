// cpu_gemm.h: the CPU 16-bit GEMM (GemmLowp of backend.h), in the
// precision the caller passes (the backend's). The operands widen exactly
// to FP32, cblas_sgemm multiplies with FP32 sums, the epilogue (bias,
// activation or its gradient, pre-activation output: gemm_epilogue.h) runs
// in FP32 in the same pass that rounds the result once (RNE): the
// arithmetic contract of a Tensor Core GEMM, and no extra pass over memory
// for the epilogue. The bias gradient of A is summed from the widened A
// (already in cache), in the order of the unfused column-sum pass
// (cpu::bias_grad_columns), so it gives the same bits as that separate pass.
//
// Large GEMMs are split over a CpuThreadPool. The output is cut into a few
// slices along n (columns) when A is the smaller operand, along m (rows)
// otherwise; the threads widen the shared operand together, then take
// slices: each widens its own part of the other operand, runs one
// single-threaded cblas_sgemm and rounds its part of the output (with the
// epilogue). Small GEMMs run whole on the calling thread, as one BLAS call.
//
// Slice boundaries depend only on the shape and the team size (not on which
// thread takes a slice), so a result is the same from run to run. As with
// the BLAS's own threading, another team size may change the last bit of a
// sum: the BLAS kernel's summation order depends on where a slice starts.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm_lowp.h"
#include "kernels/lowp_codec.h"
#include "kernels/cpu/cpu_thread_pool.h"

namespace ddp {

// Widened operands and the FP32 result, grown on demand and reused, so a
// training step allocates nothing.
struct CpuGemmScratch {
  std::vector<float> a_fp32, b_fp32, c_fp32, bias_fp32;
  // What the widened operands hold: they only grow, to the largest GEMM's.
  size_t bytes() const {
    return (a_fp32.capacity() + b_fp32.capacity() + c_fp32.capacity() + bias_fp32.capacity()) * sizeof(float);
  }
};

void cpu_gemm_lowp(Precision p, const GemmLowp& g, CpuThreadPool& pool, CpuGemmScratch& scratch);
// The gemm_lowp_to_fp32 op (ops/gemm.h): the same slices and BLAS calls as
// cpu_gemm_lowp, the FP32 result left in c_fp32 (row stride g.ldc) instead
// of rounded, so fp16(c_fp32) is cpu_gemm_lowp's C (beta 0). C is read in
// place when beta != 0: no scratch for it.
void cpu_gemm_lowp_to_fp32(Precision p, const GemmLowp& g, float* c_fp32, CpuThreadPool& pool, CpuGemmScratch& scratch);

// The gemm_batched_lowp op (ops/gemm.h): cpu_gemm_lowp on each of the batch_count
// products. Many small products are shared out whole over the pool (one
// BLAS call each, on one thread, with a scratch per piece: `scratch` grows
// to as many as there are pieces); fewer products than threads run one
// after another, each split over the pool. The split depends only on the
// batch count and the team size, so results are the same run to run; a
// large product shared out whole may differ in the last bit from the same
// product split over the team (see above), as one thread's BLAS call does.
void cpu_gemm_batched_lowp(Precision p, const GemmLowp& g, int batch_count, int64_t stride_a, int64_t stride_b,
                           int64_t stride_c, CpuThreadPool& pool, std::vector<CpuGemmScratch>& scratch);

}  // namespace ddp
