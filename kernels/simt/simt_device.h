// simt_device.h: CUDA's device language for g++, so that our .cu files
// compile as host C++ and run under the SIMT executor (simt_executor.cpp).
// The executor build force-includes this header first in every kernel
// translation unit (-include); nvcc never reads it.
//
// - __global__/__device__/__host__ mean nothing; __shared__ is a
//   thread_local static: a block's fibers all run on one OS thread, so they
//   share it, and blocks run one after another.
// - threadIdx, blockIdx, blockDim, gridDim are the running fiber's.
// - __syncthreads, __syncwarp, the shuffles and the votes are the
//   executor's synchronisation points; each passes its source line, so a
//   divergent barrier or shuffle is reported where it is written.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_runtime.h>

namespace ddp::simt {

struct Site {
  const char* file;
  int line;
};

struct ThreadIndex {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

// The running CUDA thread; set by the executor while a fiber runs.
extern thread_local const ThreadIndex* g_running_thread;

void sync_block(Site site);
void sync_warp(Site site, unsigned mask);
// One lockstep exchange among the lanes named in mask: every lane deposits
// `bits` and gets the bits of src_lane back.
uint64_t shuffle_bits(Site site, unsigned mask, uint64_t bits, int src_lane);
// Every lane of mask deposits its predicate; all get the ballot.
unsigned ballot(Site site, unsigned mask, bool predicate);
unsigned lane_id();

template <class T>
uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

// The source lane of each shuffle form, as PTX's shfl.sync defines it for
// CUDA's width (a power of two, segments of `width` lanes): offsets use
// their low 5 bits, and a source past the bound reads the lane's own value
// (up: before its segment; down and xor: past its segment's last lane;
// xor may reach an earlier segment).
inline int segment_first(int lane, int width) { return lane & ~(width - 1); }
inline int segment_last(int lane, int width) { return segment_first(lane, width) + width - 1; }
inline int shfl_idx_source(int lane, int src_lane, int width) {
  return segment_first(lane, width) + (src_lane & (width - 1));
}
inline int shfl_up_source(int lane, unsigned delta, int width) {
  const int j = lane - static_cast<int>(delta & 31u);
  return j >= segment_first(lane, width) ? j : lane;
}
inline int shfl_down_source(int lane, unsigned delta, int width) {
  const int j = lane + static_cast<int>(delta & 31u);
  return j <= segment_last(lane, width) ? j : lane;
}
inline int shfl_xor_source(int lane, int lane_mask, int width) {
  const int j = lane ^ (lane_mask & 31);
  return j <= segment_last(lane, width) ? j : lane;
}

// The source line of a synchronisation call, with the calls as members, so
// that `__shfl_xor_sync(mask, v, 16)` becomes At{file, line}.shfl_xor(...).
struct At {
  Site site;
  void syncwarp(unsigned mask = 0xffffffffu) const { sync_warp(site, mask); }
  template <class T>
  T shfl(unsigned mask, T v, int src_lane, int width = 32) const {
    const int src = shfl_idx_source(static_cast<int>(lane_id()), src_lane, width);
    return from_bits<T>(shuffle_bits(site, mask, to_bits(v), src));
  }
  template <class T>
  T shfl_xor(unsigned mask, T v, int lane_mask, int width = 32) const {
    const int src = shfl_xor_source(static_cast<int>(lane_id()), lane_mask, width);
    return from_bits<T>(shuffle_bits(site, mask, to_bits(v), src));
  }
  template <class T>
  T shfl_down(unsigned mask, T v, unsigned delta, int width = 32) const {
    const int src = shfl_down_source(static_cast<int>(lane_id()), delta, width);
    return from_bits<T>(shuffle_bits(site, mask, to_bits(v), src));
  }
  template <class T>
  T shfl_up(unsigned mask, T v, unsigned delta, int width = 32) const {
    const int src = shfl_up_source(static_cast<int>(lane_id()), delta, width);
    return from_bits<T>(shuffle_bits(site, mask, to_bits(v), src));
  }
  unsigned ballot_sync(unsigned mask, int predicate) const { return ballot(site, mask, predicate != 0); }
  int any_sync(unsigned mask, int predicate) const { return ballot(site, mask, predicate != 0) != 0; }
  int all_sync(unsigned mask, int predicate) const { return ballot(site, mask, predicate == 0) == 0; }
};

}  // namespace ddp::simt

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __launch_bounds__(...)

#define threadIdx (::ddp::simt::g_running_thread->thread_idx)
#define blockIdx (::ddp::simt::g_running_thread->block_idx)
#define blockDim (::ddp::simt::g_running_thread->block_dim)
#define gridDim (::ddp::simt::g_running_thread->grid_dim)

#define DDP_SIMT_AT (::ddp::simt::At{::ddp::simt::Site{__FILE__, __LINE__}})
#define __syncthreads() ::ddp::simt::sync_block(::ddp::simt::Site{__FILE__, __LINE__})
#define __syncwarp DDP_SIMT_AT.syncwarp
#define __shfl_sync DDP_SIMT_AT.shfl
#define __shfl_xor_sync DDP_SIMT_AT.shfl_xor
#define __shfl_down_sync DDP_SIMT_AT.shfl_down
#define __shfl_up_sync DDP_SIMT_AT.shfl_up
#define __ballot_sync DDP_SIMT_AT.ballot_sync
#define __any_sync DDP_SIMT_AT.any_sync
#define __all_sync DDP_SIMT_AT.all_sync

// Device-side overloads CUDA provides and the host's library does not.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// Rounded FP32 arithmetic that nvcc will not contract into an FMA; the host
// compiler does not contract (ISO C++, no -mfma), so the plain operators
// round the same way.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
