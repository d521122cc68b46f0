// simt_runtime_state.h: what the executor asks of the emulated CUDA runtime
// (simt_runtime.cpp) at a launch: the device, the kernel's shared-memory
// opt-in there, whether a stream exists.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace ddp::simt {

// The emulated devices: as many as DDP_SIMT_DEVICES says (default 2, so
// code that keys state by device is exercised), each an H100/H200-like
// compute capability 9.0 part.
constexpr int kSharedBytesDefaultLimit = 48 * 1024;  // without the opt-in attribute
constexpr int kSharedBytesOptInLimit = 227 * 1024;   // Hopper's cudaDevAttrMaxSharedMemoryPerBlockOptin
int current_device();
// The dynamic shared memory the kernel may ask for on the current device:
// 48 KB, or what cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize)
// allowed on this device.
size_t dynamic_shared_limit(const void* kernel);
bool stream_exists(cudaStream_t stream);

}  // namespace ddp::simt
