// cuda_raii.h: owning handles for CUDA objects, so a constructor that throws
// half-way (out of memory, no kernel image) releases what it already made.
// Deleters never throw; a failure to release is printed, not fatal.
#pragma once

#include <memory>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace ddp {

struct CudaStreamDeleter {
  void operator()(cudaStream_t stream) const noexcept { DDP_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream)); }
};
// cudaStream_t is CUstream_st*, so the pointee type is CUstream_st.
using UniqueCudaStream = std::unique_ptr<CUstream_st, CudaStreamDeleter>;

struct CudaEventDeleter {
  void operator()(cudaEvent_t event) const noexcept { DDP_CUDA_CHECK_NOTHROW(cudaEventDestroy(event)); }
};
using UniqueCudaEvent = std::unique_ptr<CUevent_st, CudaEventDeleter>;

struct CudaGraphExecDeleter {
  void operator()(cudaGraphExec_t exec) const noexcept { DDP_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec)); }
};
// cudaGraphExec_t is CUgraphExec_st*.
using UniqueCudaGraphExec = std::unique_ptr<CUgraphExec_st, CudaGraphExecDeleter>;

struct CudaFreeDeleter {
  void operator()(void* ptr) const noexcept { DDP_CUDA_CHECK_NOTHROW(cudaFree(ptr)); }
};
// Device memory from cudaMalloc.
using UniqueDeviceMemory = std::unique_ptr<void, CudaFreeDeleter>;

struct CudaFreeHostDeleter {
  void operator()(void* ptr) const noexcept { DDP_CUDA_CHECK_NOTHROW(cudaFreeHost(ptr)); }
};
// Page-locked host memory from cudaHostAlloc: the only host memory a
// cudaMemcpyAsync copies from without a host-synchronous bounce.
using UniquePinnedHostMemory = std::unique_ptr<void, CudaFreeHostDeleter>;

inline UniquePinnedHostMemory cuda_host_alloc_unique(size_t size_bytes) {
  void* ptr = nullptr;
  if (size_bytes > 0) DDP_CUDA_CHECK(cudaHostAlloc(&ptr, size_bytes, cudaHostAllocDefault));
  return UniquePinnedHostMemory(ptr);
}

// Events that only order work (no timing: cheaper to record and wait on).
inline UniqueCudaEvent make_ordering_event() {
  cudaEvent_t event = nullptr;
  DDP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return UniqueCudaEvent(event);
}

inline UniqueDeviceMemory cuda_malloc_unique(size_t size_bytes) {
  void* ptr = nullptr;
  if (size_bytes > 0) DDP_CUDA_CHECK(cudaMalloc(&ptr, size_bytes));
  return UniqueDeviceMemory(ptr);
}

inline UniqueCudaStream make_non_blocking_stream() {
  cudaStream_t stream = nullptr;
  DDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return UniqueCudaStream(stream);
}

}  // namespace ddp
