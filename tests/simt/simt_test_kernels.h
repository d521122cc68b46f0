// simt_test_kernels.h: small kernels, right and deliberately wrong, that
// test the SIMT executor's execution model and its checks
// (simt_test_kernels.cu; test_simt_*.cpp). Pointers are device memory
// (cudaMalloc); each launcher runs one grid and returns when it is done.
#pragma once

#include <cstddef>

namespace ddp::simt_test {

// out[b * n + i] = in[b * n + n - 1 - i], through shared memory, one block of
// n threads per row; with_barrier = false drops the __syncthreads().
void reverse_rows(const float* in, float* out, int rows, int n, bool with_barrier);
// out[i] = the sum over the warp of in (lane's warp), by an xor butterfly.
void warp_sums(const float* in, float* out, int threads);
// For each lane: shfl_down by 1, shfl_up by 1, the value of lane 3, ballot
// of (value > 0), any and all of it, in six outputs per lane.
void warp_intrinsics(const float* in, float* out, int threads);
// Lanes >= 16 return, then every lane shuffles with the full mask.
void shuffle_after_exit(float* out);
// A block of `threads` (not a multiple of 32) shuffles with the full mask.
void shuffle_in_partial_warp(float* out, int threads);
// Warp 0 and the rest reach __syncthreads() at different lines.
void barrier_at_two_lines(float* out);
// Lanes 0..15 shuffle while lanes 16..31 wait at a barrier.
void shuffle_against_barrier(float* out);
// Lane 0 writes shared, lane 1 reads it; with_syncwarp orders them.
void lane_handoff(float* out, bool with_syncwarp);
// The __syncwarp() patterns of the race detector's rule, by number:
// 0: all lanes read, __syncwarp(), lane 0 writes (ordered);
// 1: lane 1 reads, __syncwarp(), lane 0 reads and writes (ordered);
// 2: lane 0 reads, __syncwarp(), lane 0 reads again, lane 1 writes with no
//    __syncwarp() after lane 0's second read (a race);
// 3: lane 1 writes, lanes 0 and 3 pass __syncwarp(0x9), lane 3 reads: the
//    barrier did not name lane 1 (a race).
void syncwarp_pattern(float* out, int pattern);
// Lanes < 16 and lanes >= 16 shuffle with the full mask at different lines
// (valid from sm_70 on): out[lane] = the value of lane ^ 16.
void shuffle_in_both_branches(float* out);
// out[lane] = __shfl_xor_sync(full, lane, 16, width 16): xor may read an
// earlier segment, never a later one.
void shuffle_xor_narrow(float* out);
// out[i] = value for i <= n (one past the end when n == the allocation).
void write_through(float* out, int n);
// Writes element `index` of a 256-float dynamic shared buffer.
void dynamic_shared_write(float* out, int index);
// Writes element `index` of a static __shared__ float[32].
void static_shared_write(float* out, int index);
// Launches with `bytes` of dynamic shared memory after optionally raising
// the kernel's allowance on the current device.
void big_shared_launch(float* out, size_t bytes, bool opt_in);
// A launch with the given block and grid shape (the kernel does nothing).
void shaped_launch(unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y, unsigned block_z);
// out[linear block * threads + linear thread] = its blockIdx/threadIdx
// packed as (bz*100 + by*10 + bx) * 1000 + (tz*100 + ty*10 + tx).
void index_map(float* out, unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned bz);

}  // namespace ddp::simt_test
