// simt_test_kernels.cu: see simt_test_kernels.h. Compiled only for the SIMT
// executor (tests/CMakeLists.txt); the broken kernels are broken on purpose.
#include "simt/simt_test_kernels.h"

#include "kernels/cuda/cuda_launch.cuh"

namespace ddp::simt_test {
namespace {

constexpr unsigned kFull = 0xffffffffu;

__global__ void reverse_kernel(const float* in, float* out, int n, bool with_barrier) {
  __shared__ float row[1024];
  const int i = static_cast<int>(threadIdx.x);
  const size_t base = static_cast<size_t>(blockIdx.x) * n;
  row[i] = in[base + i];
  if (with_barrier) __syncthreads();
  out[base + i] = row[n - 1 - i];
}

__global__ void warp_sum_kernel(const float* in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFull, v, offset);
  out[i] = v;
}

__global__ void intrinsics_kernel(const float* in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float v = in[i];
  float* o = out + 6 * static_cast<size_t>(i);
  o[0] = __shfl_down_sync(kFull, v, 1);
  o[1] = __shfl_up_sync(kFull, v, 1);
  o[2] = __shfl_sync(kFull, v, 3);
  o[3] = static_cast<float>(__ballot_sync(kFull, v > 0.0f) & 0xffffu);  // FP32-exact
  o[4] = static_cast<float>(__any_sync(kFull, v > 0.0f));
  o[5] = static_cast<float>(__all_sync(kFull, v > 0.0f));
}

__global__ void exit_then_shuffle_kernel(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(kFull, 1.0f, 1);
}

__global__ void partial_warp_kernel(float* out) { out[threadIdx.x] = __shfl_xor_sync(kFull, 1.0f, 1); }

__global__ void two_barriers_kernel(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_against_barrier_kernel(float* out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_xor_sync(kFull, 1.0f, 1);
  else
    __syncthreads();
}

__global__ void handoff_kernel(float* out, bool with_syncwarp) {
  __shared__ float slot[32];
  if (threadIdx.x == 0) slot[0] = 42.0f;
  if (with_syncwarp) __syncwarp();
  if (threadIdx.x == 1) out[0] = slot[0];
}

__global__ void syncwarp_pattern_kernel(float* out, int pattern) {
  __shared__ float m[1];
  const unsigned lane = threadIdx.x;
  if (lane == 0) m[0] = 1.0f;
  __syncthreads();
  float seen = 0.0f;
  if (pattern == 0) {
    seen = m[0];
    __syncwarp();
    if (lane == 0) m[0] = seen + 1.0f;
  } else if (pattern == 1) {
    if (lane == 1) seen = m[0];
    __syncwarp();
    if (lane == 0) m[0] = m[0] + 1.0f;
  } else if (pattern == 2) {
    if (lane == 0) seen = m[0];
    __syncwarp();
    if (lane == 0) seen += m[0];
    if (lane == 1) m[0] = 5.0f;
  } else {
    if (lane == 1) m[0] = 7.0f;
    if (lane == 0 || lane == 3) __syncwarp(0x9u);
    if (lane == 3) seen = m[0];
  }
  out[lane] = seen;
}

__global__ void both_branches_kernel(float* out) {
  const float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_xor_sync(kFull, v, 16);
  else
    out[threadIdx.x] = __shfl_xor_sync(kFull, v, 16);
}

__global__ void xor_narrow_kernel(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(kFull, static_cast<float>(threadIdx.x), 16, 16);
}

__global__ void write_kernel(float* out, int n) {
  for (int i = static_cast<int>(threadIdx.x); i <= n; i += static_cast<int>(blockDim.x)) out[i] = 1.0f;
}

__global__ void dynamic_shared_kernel(float* out, int index) {
  DDP_DYNAMIC_SHARED(float, buffer);
  if (threadIdx.x == 0) {
    buffer[index] = 1.0f;
    out[0] = buffer[index];
  }
}

__global__ void static_shared_kernel(float* out, int index) {
  __shared__ float buffer[32];
  if (threadIdx.x == 0) {
    buffer[index] = 1.0f;
    out[0] = buffer[0];
  }
}

__global__ void big_shared_kernel(float* out) {
  DDP_DYNAMIC_SHARED(float, buffer);
  buffer[threadIdx.x] = 2.0f;
  out[threadIdx.x] = buffer[threadIdx.x];
}

__global__ void empty_kernel() {}

__global__ void index_kernel(float* out) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  out[block * threads + thread] = static_cast<float>((blockIdx.z * 100 + blockIdx.y * 10 + blockIdx.x) * 1000 +
                                                     threadIdx.z * 100 + threadIdx.y * 10 + threadIdx.x);
}

}  // namespace

void reverse_rows(const float* in, float* out, int rows, int n, bool with_barrier) {
  launch_kernel<reverse_kernel>({static_cast<unsigned>(rows), static_cast<unsigned>(n)}, in, out, n, with_barrier);
}

void warp_sums(const float* in, float* out, int threads) {
  launch_kernel<warp_sum_kernel>({1u, static_cast<unsigned>(threads)}, in, out);
}

void warp_intrinsics(const float* in, float* out, int threads) {
  launch_kernel<intrinsics_kernel>({1u, static_cast<unsigned>(threads)}, in, out);
}

void shuffle_after_exit(float* out) { launch_kernel<exit_then_shuffle_kernel>({1u, 32u}, out); }

void shuffle_in_partial_warp(float* out, int threads) {
  launch_kernel<partial_warp_kernel>({1u, static_cast<unsigned>(threads)}, out);
}

void barrier_at_two_lines(float* out) { launch_kernel<two_barriers_kernel>({1u, 64u}, out); }

void shuffle_against_barrier(float* out) { launch_kernel<shuffle_against_barrier_kernel>({1u, 32u}, out); }

void lane_handoff(float* out, bool with_syncwarp) { launch_kernel<handoff_kernel>({1u, 32u}, out, with_syncwarp); }

void syncwarp_pattern(float* out, int pattern) { launch_kernel<syncwarp_pattern_kernel>({1u, 32u}, out, pattern); }

void shuffle_in_both_branches(float* out) { launch_kernel<both_branches_kernel>({1u, 32u}, out); }

void shuffle_xor_narrow(float* out) { launch_kernel<xor_narrow_kernel>({1u, 32u}, out); }

void write_through(float* out, int n) { launch_kernel<write_kernel>({1u, 64u}, out, n); }

void dynamic_shared_write(float* out, int index) {
  launch_kernel<dynamic_shared_kernel>({1u, 32u, 256 * sizeof(float)}, out, index);
}

void static_shared_write(float* out, int index) { launch_kernel<static_shared_kernel>({1u, 32u}, out, index); }

void big_shared_launch(float* out, size_t bytes, bool opt_in) {
  if (opt_in)
    cudaFuncSetAttribute(reinterpret_cast<const void*>(&big_shared_kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes));
  launch_kernel<big_shared_kernel>({1u, 32u, bytes}, out);
}

void shaped_launch(unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y, unsigned block_z) {
  launch_kernel<empty_kernel>({dim3(grid_x, grid_y), dim3(block_x, block_y, block_z)});
}

void index_map(float* out, unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned bz) {
  launch_kernel<index_kernel>({dim3(gx, gy), dim3(bx, by, bz)}, out);
}

}  // namespace ddp::simt_test
