// test_cuda_op_context.h: the CudaOpContext the kernel suites hand to the
// ops' CUDA rows (kernels/cuda/cuda_op_context.h): the default stream, the
// suite's 16-bit format and a scratch buffer grown to the largest request,
// on cudaMalloc (the SIMT executor's exact-size allocations, or a GPU's).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"
#include "support/device_array.h"

namespace ddp::test {

class TestCudaOpContext final : public CudaOpContext {
 public:
  explicit TestCudaOpContext(Precision precision) : precision_(precision) {}
  cudaStream_t stream() const override { return nullptr; }
  Precision precision() const override { return precision_; }
  // cuBLASLt is not emulated: the GEMM ops' CUDA rows run in
  // ddp_cuda_tests on a CudaBackend.
  CublasLtGemm& cublaslt_gemm() override { throw Error("TestCudaOpContext has no cuBLASLt"); }
  // Exactly the bytes asked for, every call (the last call's are freed):
  // under the executor a row that asks for too little reads past an
  // exact-size allocation, which fails the launch.
  void* scratch(size_t size_bytes) override {
    scratch_.reset();
    scratch_ = std::make_unique<DeviceArray<unsigned char>>(size_bytes);
    return scratch_->get();
  }

 private:
  Precision precision_;
  std::unique_ptr<DeviceArray<unsigned char>> scratch_;
};

}  // namespace ddp::test
