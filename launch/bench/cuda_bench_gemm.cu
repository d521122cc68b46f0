// cuda_bench_gemm.cu: times cublasGemmEx FP16 (FP32 compute) with CUDA events.
#include "launch/bench/cuda_bench_gemm.h"

#include <cstdint>
#include <memory>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_raii.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr int kWarmupIterations = 3;
// Same workspace as CudaBackend gives cuBLASLt, so the comparison is fair.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Random-looking values in [-1, 1): Tensor Core power (and so clocks) depend
// on the data, and all-zero operands would flatter the number.
__global__ void fill_pseudo_random_kernel(__half* x, size_t count, uint32_t seed) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    x[i] = __float2half_rn(static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

void fill_pseudo_random(__half* x, size_t count, uint32_t seed, cudaStream_t stream) {
  fill_pseudo_random_kernel<<<1024, 256, 0, stream>>>(x, count, seed);
  DDP_CUDA_CHECK_LAUNCH();
}

struct CublasHandleDeleter {
  void operator()(cublasContext* handle) const noexcept { DDP_CUBLAS_CHECK_NOTHROW(cublasDestroy(handle)); }
};

}  // namespace

double cublas_gemm_ex_fp16_tflops(int m, int n, int k, int iterations) {
  DDP_REQUIRE(m > 0 && n > 0 && k > 0 && iterations > 0, "cublas_gemm_ex_fp16_tflops: sizes must be positive");
  const size_t a_count = static_cast<size_t>(m) * k, b_count = static_cast<size_t>(k) * n,
               c_count = static_cast<size_t>(m) * n;
  UniqueCudaStream stream = make_non_blocking_stream();
  UniqueDeviceMemory a = cuda_malloc_unique(a_count * sizeof(__half));
  UniqueDeviceMemory b = cuda_malloc_unique(b_count * sizeof(__half));
  UniqueDeviceMemory c = cuda_malloc_unique(c_count * sizeof(__half));
  UniqueDeviceMemory workspace = cuda_malloc_unique(kWorkspaceBytes);
  fill_pseudo_random(static_cast<__half*>(a.get()), a_count, 1u, stream.get());
  fill_pseudo_random(static_cast<__half*>(b.get()), b_count, 2u, stream.get());

  cublasHandle_t raw_handle = nullptr;
  DDP_CUBLAS_CHECK(cublasCreate(&raw_handle));
  std::unique_ptr<cublasContext, CublasHandleDeleter> handle(raw_handle);
  DDP_CUBLAS_CHECK(cublasSetStream(handle.get(), stream.get()));
  DDP_CUBLAS_CHECK(cublasSetWorkspace(handle.get(), workspace.get(), kWorkspaceBytes));
  // Our GEMM keeps split-K partial sums in FP32 (one rounding to FP16); hold
  // cuBLAS to the same contract so the ratio compares like with like.
  DDP_CUBLAS_CHECK(cublasSetMathMode(handle.get(), CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));

  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's A is our B.
  auto gemm = [&] {
    DDP_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b.get(), CUDA_R_16F, n,
                                  a.get(), CUDA_R_16F, k, &beta, c.get(), CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  };
  for (int i = 0; i < kWarmupIterations; ++i) gemm();

  cudaEvent_t raw_start = nullptr, raw_stop = nullptr;
  DDP_CUDA_CHECK(cudaEventCreate(&raw_start));
  UniqueCudaEvent start(raw_start);
  DDP_CUDA_CHECK(cudaEventCreate(&raw_stop));
  UniqueCudaEvent stop(raw_stop);
  DDP_CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
  for (int i = 0; i < iterations; ++i) gemm();
  DDP_CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
  DDP_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float elapsed_ms = 0.0f;
  DDP_CUDA_CHECK(cudaEventElapsedTime(&elapsed_ms, start.get(), stop.get()));

  const double flops = 2.0 * m * n * static_cast<double>(k) * iterations;
  return flops / (static_cast<double>(elapsed_ms) * 1e-3) / 1e12;
}

}  // namespace ddp
