// host_device.h: the one macro that lets element-wise math live in headers
// read by both g++ and nvcc. Outside nvcc it expands to nothing, so the same
// inline function is a plain host function there.
#pragma once

#if defined(__CUDACC__)
#define DDP_HD __host__ __device__ __forceinline__
#else
#define DDP_HD inline
#endif
