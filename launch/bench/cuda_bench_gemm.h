// cuda_bench_gemm.h: cuBLAS's own FP16 GEMM speed on a shape, the yardstick
// for our cuBLASLt GEMM in bench_kernels (reported as a ratio).
#pragma once

namespace ddp {

// TFLOP/s (2*m*n*k per GEMM) of cublasGemmEx with FP16 A/B/C and
// CUBLAS_COMPUTE_32F on the current CUDA device, for the row-major product
// C[m,n] = A[m,k] B[k,n] (no transposes; our gemm_lowp with Transpose::No on
// both maps to the same column-major problem). Averages `iterations` timed
// calls after a warm-up. Throws ddp::Error on any CUDA/cuBLAS failure.
double cublas_gemm_ex_fp16_tflops(int m, int n, int k, int iterations);

}  // namespace ddp
