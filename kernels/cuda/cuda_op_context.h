// cuda_op_context.h: what an op's CUDA row (kernels/ops/<op>_cuda.cu) reads
// to queue its kernels: the stream, the 16-bit format and device scratch.
// CudaBackend is one; the kernel suites make their own
// (tests/support/test_cuda_op_context.h), under the SIMT executor and on a
// GPU alike. Plain C++: g++ can include it.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/lowp_codec.h"

namespace ddp {

class CublasLtGemm;  // cuda_gemm.h

class CudaOpContext {
 public:
  // Every kernel of a row is queued here, in call order.
  virtual cudaStream_t stream() const = 0;
  // The format of the 16-bit buffers the row reads and writes.
  virtual Precision precision() const = 0;
  // Device memory of at least size_bytes for a multi-pass reduction's
  // partial results, valid until the next call (one per row at a time),
  // grown on demand and never inside a step capture.
  virtual void* scratch(size_t size_bytes) = 0;
  // The GEMM ops' cuBLASLt plans and workspace, told whether a capture is
  // under way (plans and workspace may not grow inside one). Contexts
  // without cuBLASLt (the SIMT executor's) throw ddp::Error.
  virtual CublasLtGemm& cublaslt_gemm() = 0;

 protected:
  ~CudaOpContext() = default;
};

}  // namespace ddp
