// simt_launch.h: what a launcher sees of the SIMT executor (kernels/simt/):
// one call that runs a kernel's grid on the CPU, and the block's dynamic
// shared memory. Included by kernels/cuda/cuda_launch.cuh in executor builds
// (DDP_SIMT) only.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <cuda_runtime.h>

namespace ddp::simt {

struct KernelLaunch {
  std::string kernel_name;  // for error messages: "layernorm_forward_kernel<ddp::Fp16Codec>"
  const void* kernel_id;    // the kernel's address: the key of its attributes (cudaFuncSetAttribute)
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes;
  cudaStream_t stream;
};

// Runs thread_body once per CUDA thread of every block of the grid, each on
// its own fiber, blocks one after another; returns when the grid is done
// (streams run in order, so a launch is complete when it returns). Throws
// ddp::Error naming the kernel when a launch or execution rule is broken.
void launch_grid(const KernelLaunch& launch, const std::function<void()>& thread_body);

// The running block's dynamic shared memory (the launch's shared_bytes).
void* dynamic_shared_memory();

// "name<args>" of a kernel given as a template argument, from the compiler's
// spelling of this function's signature.
template <auto Kernel>
std::string kernel_name() {
  const std::string pretty = __PRETTY_FUNCTION__;  // "... [with auto Kernel = name<args>; ...]"
  const std::string key = "Kernel = ";
  const size_t begin = pretty.find(key);
  if (begin == std::string::npos) return pretty;
  size_t end = pretty.find_first_of(";]", begin);
  std::string name = pretty.substr(begin + key.size(), end - begin - key.size());
  // The kernel's own name and template arguments, without its namespaces.
  const size_t scope = name.rfind("::", name.find('<'));
  return scope == std::string::npos ? name : name.substr(scope + 2);
}

}  // namespace ddp::simt
