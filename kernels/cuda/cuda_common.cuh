// cuda_common.cuh: launch geometry and warp/block reductions shared by the
// .cu files (device code only; nvcc reads this, g++ never does).
//
// Reductions here are deterministic: the grid size depends only on the
// element count (never on the device's SM count), each thread sums a fixed
// set of elements in a fixed order, and partial sums are combined by a fixed
// tree. Same inputs, same bits, on any GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_launch.cuh"

namespace ddp {

constexpr unsigned kThreadsPerBlock = 256;
// Grid-stride loops cap the grid: past this many blocks each thread simply
// does more elements, and the launch never exceeds gridDim limits. The SIMT
// executor's build caps it at 3 blocks, so that the loops' later passes run
// on its suites' small inputs (on a GPU they begin past 65536 x 256
// elements, more than the executor can afford).
#if defined(DDP_SIMT)
constexpr size_t kMaxGridBlocks = 3;
#else
constexpr size_t kMaxGridBlocks = 65536;
#endif
// Two-pass reductions: at most this many partial sums, combined by one block.
constexpr unsigned kReduceBlocks = 1024;
constexpr unsigned kFinalReduceThreads = 1024;

inline unsigned grid_for(size_t count, size_t max_blocks = kMaxGridBlocks) {
  size_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned>(blocks);
}

// ceil(count / per_block) in 64 bits: a count near INT_MAX does not wrap.
inline unsigned blocks_for(long long count, long long per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

__device__ __forceinline__ size_t global_thread_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ size_t grid_stride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

// Butterfly sum: every lane ends with the warp's total.
template <class T>
__device__ __forceinline__ T warp_all_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Block sum for blockDim.x a multiple of 32 (<= 1024); the result is valid in
// thread 0. Starts with a barrier so it can be called more than once per
// kernel with the same T (the shared array is reused).
template <class T>
__device__ T block_sum(T v) {
  __shared__ T warp_sums[32];
  __syncthreads();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = warp_all_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const unsigned warps = blockDim.x >> 5;
  v = threadIdx.x < warps ? warp_sums[threadIdx.x] : T(0);
  if (warp == 0) v = warp_all_sum(v);
  return v;
}

// Pass 1 of sum_i term(i) for i < count: one double partial per block.
// Terms are summed in double: these kernels are memory-bound, so the FP64
// adds cost nothing measurable and the result is at least FP32-accurate
// whatever the count.
template <class Term>
__global__ void partial_sums_kernel(Term term, size_t count, double* partials) {
  double sum = 0.0;
  for (size_t i = global_thread_index(); i < count; i += grid_stride()) sum += term(i);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Pass 2: one block sums the partials in a fixed order and writes
// finish(total) to *out.
template <class Finish>
__global__ void finish_sum_kernel(const double* partials, unsigned partial_count, Finish finish, float* out) {
  double sum = 0.0;
  for (unsigned i = threadIdx.x; i < partial_count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = finish(sum);
}

inline size_t sum_scratch_bytes() { return kReduceBlocks * sizeof(double); }

// Launches both passes on `stream`; `scratch` holds sum_scratch_bytes().
template <class Term, class Finish>
void launch_sum(cudaStream_t stream, Term term, size_t count, Finish finish, float* out, void* scratch) {
  auto* partials = static_cast<double*>(scratch);
  const unsigned blocks = grid_for(count, kReduceBlocks);
  launch_kernel<partial_sums_kernel<Term>>({blocks, kThreadsPerBlock, 0, stream}, term, count, partials);
  DDP_CUDA_CHECK_LAUNCH();
  launch_kernel<finish_sum_kernel<Finish>>({1, kFinalReduceThreads, 0, stream}, partials, blocks, finish, out);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
