// cuda_launch.cuh: the one way our launchers start a kernel, on both paths.
//
// A launcher computes grid, block and dynamic shared-memory size once and
// calls launch_kernel<kernel>(shape, args...). Under nvcc that is the usual
// kernel<<<grid, block, shared, stream>>>(args...); in the SIMT executor's
// build (DDP_SIMT, kernels/simt/) the same call runs the kernel on the CPU,
// one fiber per CUDA thread, with the launch checks a GPU would make. So
// the launch logic exists once, and it is the one CI executes.
//
// DDP_DYNAMIC_SHARED(T, name) declares the block's dynamic shared memory
// (the launch's `shared_bytes`) as T name[] on both paths.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#if defined(DDP_SIMT)
#include "kernels/simt/simt_launch.h"
#define DDP_DYNAMIC_SHARED(T, name) T* const name = static_cast<T*>(::ddp::simt::dynamic_shared_memory())
#else
#define DDP_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

namespace ddp {

struct LaunchShape {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Launch errors (a bad shape, a missing kernel image) surface through
// cudaGetLastError as before: launchers keep their DDP_CUDA_CHECK_LAUNCH().
// The executor throws instead, naming the kernel and the broken rule.
template <auto Kernel, class... Args>
void launch_kernel(const LaunchShape& shape, const Args&... args) {
#if defined(DDP_SIMT)
  simt::launch_grid(simt::KernelLaunch{simt::kernel_name<Kernel>(), reinterpret_cast<const void*>(Kernel), shape.grid,
                                       shape.block, shape.shared_bytes, shape.stream},
                    [&] { Kernel(args...); });
#else
  // clang-format reads a .cuh as C++, where ">>>" is three tokens.
  // clang-format off
  Kernel<<<shape.grid, shape.block, shape.shared_bytes, shape.stream>>>(args...);
  // clang-format on
#endif
}

}  // namespace ddp
