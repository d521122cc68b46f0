// cuda_check.h: checking macros for the CUDA runtime and cuBLAS/cuBLASLt
// (cuBLASLt returns cublasStatus_t too). Each throws ddp::Error naming
// file:line, the call as written and the library's own name and text; the
// _NOTHROW twins print the same line to stderr instead, for destructors and
// other noexcept paths where throwing would terminate the program.
#pragma once

#include <cstdio>
#include <string>

#include <cublas_api.h>
#include <cuda_runtime.h>

#include "kernels/error.h"

namespace ddp {

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

inline std::string cublas_status_text(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s);
}

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* file, int line, const char* call) {
  throw Error(format_call_error(file, line, call, cuda_error_text(e)));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t s, const char* file, int line, const char* call) {
  throw Error(format_call_error(file, line, call, cublas_status_text(s)));
}

inline void report_cuda_error(cudaError_t e, const char* file, int line, const char* call) noexcept {
  std::fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

inline void report_cublas_error(cublasStatus_t s, const char* file, int line, const char* call) noexcept {
  std::fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, call, cublasGetStatusName(s),
               cublasGetStatusString(s));
}

}  // namespace ddp

#define DDP_CUDA_CHECK(call)                                                                             \
  do {                                                                                                   \
    const cudaError_t ddp_cuda_err_ = (call);                                                            \
    if (ddp_cuda_err_ != cudaSuccess) ::ddp::throw_cuda_error(ddp_cuda_err_, __FILE__, __LINE__, #call); \
  } while (0)

#define DDP_CUDA_CHECK_NOTHROW(call)                                                                      \
  do {                                                                                                    \
    const cudaError_t ddp_cuda_err_ = (call);                                                             \
    if (ddp_cuda_err_ != cudaSuccess) ::ddp::report_cuda_error(ddp_cuda_err_, __FILE__, __LINE__, #call); \
  } while (0)

// After a kernel launch (launch_kernel, cuda_launch.cuh): catches bad launch
// configurations and missing kernel images at the launcher that caused them.
// Errors from the kernel's execution surface later, at the next synchronising
// call.
#define DDP_CUDA_CHECK_LAUNCH()                                                                       \
  do {                                                                                                \
    const cudaError_t ddp_cuda_err_ = cudaGetLastError();                                             \
    if (ddp_cuda_err_ != cudaSuccess)                                                                 \
      ::ddp::throw_cuda_error(ddp_cuda_err_, __FILE__, __LINE__, "kernel launch (cudaGetLastError)"); \
  } while (0)

#define DDP_CUBLAS_CHECK(call)                                                                                         \
  do {                                                                                                                 \
    const cublasStatus_t ddp_cublas_st_ = (call);                                                                      \
    if (ddp_cublas_st_ != CUBLAS_STATUS_SUCCESS) ::ddp::throw_cublas_error(ddp_cublas_st_, __FILE__, __LINE__, #call); \
  } while (0)

#define DDP_CUBLAS_CHECK_NOTHROW(call)                                       \
  do {                                                                       \
    const cublasStatus_t ddp_cublas_st_ = (call);                            \
    if (ddp_cublas_st_ != CUBLAS_STATUS_SUCCESS)                             \
      ::ddp::report_cublas_error(ddp_cublas_st_, __FILE__, __LINE__, #call); \
  } while (0)
