// flash_attention_cuda.cu: the CUDA rows of the fused causal attention
// (flash_attention.h).
//
// Our own kernels, not cuDNN's fused SDPA: the GPU host's kit
// (shared/gpu-kit) names neither cuDNN nor its frontend (nor is the
// frontend installed on the build machine), so a cuDNN path could not be
// relied on to build or to be tested there. 16-bit in (the context's
// precision), FP32 math on CUDA cores (tiles of kTile rows in shared
// memory), one rounding per output. Deterministic: no atomics; dk/dv are
// summed per key tile and dq per query tile in a separate kernel, each sum
// in an order fixed by the shapes.
//
// A block of kThreads threads owns one tile of kTile rows of one head:
// query rows (forward, dq) or key rows (dk/dv); each warp owns kRowsPerWarp
// of them and each lane one key (or query) of the tile it is paired with,
// so a score is one lane's FP32 FMA chain over increasing d, a row's max
// and sum are warp butterflies, and a lane keeps its rows' accumulators for
// dimensions d = lane + 32 t in registers. Operand tiles are widened to
// FP32 in dynamic shared memory, rows padded to head_size + 1 floats so a
// warp reading 32 rows at one d hits 32 banks (even head sizes). The scale
// is applied with __fmul_rn (no FMA contraction), as the CPU row applies
// it.
#include "kernels/ops/flash_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_op_context.h"
#include "kernels/error.h"

namespace ddp {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;
// Query rows and key rows per tile (one key per lane of a warp).
constexpr int kTile = 32;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kTile / kWarps;
constexpr int kDimsPerLane = kFlashCudaMaxHeadSize / 32;
static_assert(kTile == 32, "one key (or query) of the paired tile per lane");
static_assert(kTile % kWarps == 0 && kFlashCudaMaxHeadSize % 32 == 0, "tile rows and dimensions split evenly");
// The dynamic shared memory a block may take without opting in.
constexpr size_t kDefaultSharedBytes = 48 * 1024;

__device__ float warp_all_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  return v;
}

// Rows [row0, row0 + rows) of one head [T, hs] into tile [kTile, ld] FP32;
// the tile's rows past `rows` become 0 (never used, but defined).
template <class C>
__device__ void load_tile(const lowp16* head, int row0, int rows, int hs, int ld, float* tile) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * hs; idx += kThreads) {
    const int r = idx / hs, d = idx % hs;
    tile[r * ld + d] = r < rows ? C::widen(head[static_cast<size_t>(row0 + r) * hs + d]) : 0.0f;
  }
}

// a[0..hs) . b[0..hs), one FMA chain in increasing d.
__device__ float dot_rows(const float* a, const float* b, int hs) {
  float sum = 0.0f;
  for (int d = 0; d < hs; ++d) sum = fmaf(a[d], b[d], sum);
  return sum;
}

// ---- forward: one block per (head, query tile) ------------------------------------------

template <class C>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const lowp16* q, const lowp16* k, const lowp16* v, int T, int hs, int tiles, float scale,
                         lowp16* out, float* lse) {
  DDP_DYNAMIC_SHARED(float, smem);
  const int ld = hs + 1;
  float* q_tile = smem;  // [kTile, ld]
  float* k_tile = q_tile + kTile * ld;
  float* v_tile = k_tile + kTile * ld;
  const int z = static_cast<int>(blockIdx.x) / tiles;
  const int qt = tiles - 1 - static_cast<int>(blockIdx.x) % tiles;  // longest rows first
  const size_t head = static_cast<size_t>(z) * T * hs;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i0 = qt * kTile, rows = min(kTile, T - i0);
  load_tile<C>(q + head, i0, rows, hs, ld, q_tile);

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) o[rr][t] = 0.0f;
  }
  for (int kt = 0; kt <= qt; ++kt) {  // key tiles above the diagonal: never visited
    const int j0 = kt * kTile, cols = min(kTile, T - j0);
    __syncthreads();  // the previous key tile is no longer read
    load_tile<C>(k + head, j0, cols, hs, ld, k_tile);
    load_tile<C>(v + head, j0, cols, hs, ld, v_tile);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      if (r >= rows) continue;  // uniform per warp
      const bool visible = lane < cols && j0 + lane <= i0 + r;
      const float s = visible ? __fmul_rn(scale, dot_rows(q_tile + r * ld, k_tile + lane * ld, hs)) : -INFINITY;
      // Key j0 <= i0 + r is visible in every visited tile: the max is finite.
      const float m_new = fmaxf(m[rr], warp_all_max(s));
      const float correction = expf(m[rr] - m_new);  // e^-inf = 0 on the first tile
      const float p = visible ? expf(s - m_new) : 0.0f;
      l[rr] = correction * l[rr] + warp_all_sum(p);
      m[rr] = m_new;
#pragma unroll
      for (int t = 0; t < kDimsPerLane; ++t) o[rr][t] *= correction;
      for (int j = 0; j < cols; ++j) {  // P v in increasing key order
        const float pj = __shfl_sync(kFullWarp, p, j);
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) {
          const int d = lane + 32 * t;
          if (d < hs) o[rr][t] = fmaf(pj, v_tile[j * ld + d], o[rr][t]);
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= rows) continue;
    const size_t row = static_cast<size_t>(z) * T + i0 + r;
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < hs) out[row * hs + d] = C::narrow(o[rr][t] / l[rr]);
    }
    if (lane == 0) lse[row] = m[rr] + logf(l[rr]);
  }
}

// ---- backward ---------------------------------------------------------------------------

// D[row] = sum_d dout[row, d] * out[row, d]: one warp per row, lane-strided
// FP32 partial sums, then the butterfly.
template <class C>
__global__ void flash_row_dots_kernel(const lowp16* dout, const lowp16* out, long long rows, int hs, float* row_d) {
  const long long row = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;  // uniform per warp
  const size_t base = static_cast<size_t>(row) * hs;
  float sum = 0.0f;
  for (int d = lane; d < hs; d += 32) sum = fmaf(C::widen(dout[base + d]), C::widen(out[base + d]), sum);
  sum = warp_all_sum(sum);
  if (lane == 0) row_d[row] = sum;
}

// The probability and score gradient of (query row r of q_tile/do_tile, key
// row c of k_tile/v_tile): p = e^(scale q.k - lse), ds = p (dout.v - D);
// both 0 when masked.
struct ProbAndGrad {
  float p, ds;
};
__device__ ProbAndGrad prob_and_grad(bool visible, const float* q_row, const float* do_row, const float* k_row,
                                     const float* v_row, int hs, float scale, float row_lse, float row_d) {
  if (!visible) return {0.0f, 0.0f};
  const float p = expf(__fmul_rn(scale, dot_rows(q_row, k_row, hs)) - row_lse);
  return {p, p * (dot_rows(do_row, v_row, hs) - row_d)};
}

// dk, dv: one block per (head, key tile), summing over the query tiles
// kt..tiles-1 in increasing order, and over a tile's rows in increasing row.
template <class C>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dkdv_kernel(const lowp16* q, const lowp16* k, const lowp16* v, const float* lse, const float* row_d,
                               const lowp16* dout, int T, int hs, int tiles, float scale, lowp16* dk, lowp16* dv) {
  DDP_DYNAMIC_SHARED(float, smem);
  const int ld = hs + 1;
  float* k_tile = smem;  // [kTile, ld] each
  float* v_tile = k_tile + kTile * ld;
  float* q_tile = v_tile + kTile * ld;
  float* do_tile = q_tile + kTile * ld;
  float* lse_tile = do_tile + kTile * ld;  // [kTile]
  float* d_tile = lse_tile + kTile;        // [kTile]
  const int z = static_cast<int>(blockIdx.x) / tiles, kt = static_cast<int>(blockIdx.x) % tiles;
  const size_t head = static_cast<size_t>(z) * T * hs;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int j0 = kt * kTile, cols = min(kTile, T - j0);
  load_tile<C>(k + head, j0, cols, hs, ld, k_tile);
  load_tile<C>(v + head, j0, cols, hs, ld, v_tile);

  float dk_acc[kRowsPerWarp][kDimsPerLane], dv_acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int cc = 0; cc < kRowsPerWarp; ++cc)
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) dk_acc[cc][t] = dv_acc[cc][t] = 0.0f;
  for (int qt = kt; qt < tiles; ++qt) {
    const int i0 = qt * kTile, rows = min(kTile, T - i0);
    __syncthreads();  // the previous query tile is no longer read
    load_tile<C>(q + head, i0, rows, hs, ld, q_tile);
    load_tile<C>(dout + head, i0, rows, hs, ld, do_tile);
    if (threadIdx.x < kTile) {
      const int r = static_cast<int>(threadIdx.x);
      lse_tile[r] = r < rows ? lse[static_cast<size_t>(z) * T + i0 + r] : 0.0f;
      d_tile[r] = r < rows ? row_d[static_cast<size_t>(z) * T + i0 + r] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int cc = 0; cc < kRowsPerWarp; ++cc) {
      const int c = warp * kRowsPerWarp + cc;
      if (c >= cols) continue;  // uniform per warp
      const int r = lane;       // this lane's query row
      const ProbAndGrad g = prob_and_grad(r < rows && j0 + c <= i0 + r, q_tile + r * ld, do_tile + r * ld,
                                          k_tile + c * ld, v_tile + c * ld, hs, scale, lse_tile[r], d_tile[r]);
      for (int rr = 0; rr < rows; ++rr) {
        const float p = __shfl_sync(kFullWarp, g.p, rr), ds = __shfl_sync(kFullWarp, g.ds, rr);
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) {
          const int d = lane + 32 * t;
          if (d < hs) {
            dv_acc[cc][t] = fmaf(p, do_tile[rr * ld + d], dv_acc[cc][t]);
            dk_acc[cc][t] = fmaf(ds, q_tile[rr * ld + d], dk_acc[cc][t]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int cc = 0; cc < kRowsPerWarp; ++cc) {
    const int c = warp * kRowsPerWarp + cc;
    if (c >= cols) continue;
    const size_t row = static_cast<size_t>(z) * T + j0 + c;
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < hs) {
        dv[row * hs + d] = C::narrow(dv_acc[cc][t]);
        dk[row * hs + d] = C::narrow(__fmul_rn(scale, dk_acc[cc][t]));
      }
    }
  }
}

// dq: one block per (head, query tile), summing over the key tiles 0..qt in
// increasing order, and over a tile's keys in increasing key.
template <class C>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dq_kernel(const lowp16* q, const lowp16* k, const lowp16* v, const float* lse, const float* row_d,
                             const lowp16* dout, int T, int hs, int tiles, float scale, lowp16* dq) {
  DDP_DYNAMIC_SHARED(float, smem);
  const int ld = hs + 1;
  float* q_tile = smem;  // [kTile, ld] each
  float* do_tile = q_tile + kTile * ld;
  float* k_tile = do_tile + kTile * ld;
  float* v_tile = k_tile + kTile * ld;
  const int z = static_cast<int>(blockIdx.x) / tiles;
  const int qt = tiles - 1 - static_cast<int>(blockIdx.x) % tiles;  // longest rows first
  const size_t head = static_cast<size_t>(z) * T * hs;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i0 = qt * kTile, rows = min(kTile, T - i0);
  load_tile<C>(q + head, i0, rows, hs, ld, q_tile);
  load_tile<C>(dout + head, i0, rows, hs, ld, do_tile);

  float dq_acc[kRowsPerWarp][kDimsPerLane], row_lse[kRowsPerWarp], row_dd[kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    const size_t row = static_cast<size_t>(z) * T + i0 + r;
    row_lse[rr] = r < rows ? lse[row] : 0.0f;
    row_dd[rr] = r < rows ? row_d[row] : 0.0f;
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) dq_acc[rr][t] = 0.0f;
  }
  for (int kt = 0; kt <= qt; ++kt) {
    const int j0 = kt * kTile, cols = min(kTile, T - j0);
    __syncthreads();  // the previous key tile is no longer read
    load_tile<C>(k + head, j0, cols, hs, ld, k_tile);
    load_tile<C>(v + head, j0, cols, hs, ld, v_tile);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      if (r >= rows) continue;  // uniform per warp
      const int c = lane;       // this lane's key
      const ProbAndGrad g = prob_and_grad(c < cols && j0 + c <= i0 + r, q_tile + r * ld, do_tile + r * ld,
                                          k_tile + c * ld, v_tile + c * ld, hs, scale, row_lse[rr], row_dd[rr]);
      for (int j = 0; j < cols; ++j) {
        const float ds = __shfl_sync(kFullWarp, g.ds, j);
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) {
          const int d = lane + 32 * t;
          if (d < hs) dq_acc[rr][t] = fmaf(ds, k_tile[j * ld + d], dq_acc[rr][t]);
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= rows) continue;
    const size_t row = static_cast<size_t>(z) * T + i0 + r;
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < hs) dq[row * hs + d] = C::narrow(__fmul_rn(scale, dq_acc[rr][t]));
    }
  }
}

// Shape checks common to both ops; returns the grid size (heads x tiles),
// 0 when there is nothing to do.
unsigned flash_grid(const char* op, int batch_heads, int seq_len, int head_size) {
  DDP_REQUIRE(batch_heads >= 0 && seq_len >= 0, std::string(op) + ": negative shape");
  DDP_REQUIRE(head_size >= 1 && head_size <= kFlashCudaMaxHeadSize,
              std::string(op) + ": head_size " + std::to_string(head_size) + " outside the CUDA kernel's 1.." +
                  std::to_string(kFlashCudaMaxHeadSize) + " (kFlashCudaMaxHeadSize); use the explicit attention path");
  const long long tiles = (static_cast<long long>(seq_len) + kTile - 1) / kTile;
  const long long blocks = tiles * batch_heads;
  // One block per (head, tile) on grid x (limit 2^31 - 1; grid y's 65535
  // is never used).
  DDP_REQUIRE(blocks <= INT_MAX, std::string(op) + ": too many (head, tile) pairs for one grid");
  DDP_REQUIRE(static_cast<long long>(batch_heads) * seq_len * head_size <= LLONG_MAX / 2,
              std::string(op) + ": tensor too large");
  return static_cast<unsigned>(blocks);
}

// Opts the kernel in to `bytes` of dynamic shared memory when that is more
// than the default 48 KB (head sizes above ~90 in the backward), after
// checking the device allows it.
// Once per device, kernel and size: the eager first step sets it, so a
// launch inside a CUDA graph's capture makes no such call. The allowance is
// the device's (a process that launches on a second device must ask there
// too: issue 48, shown under the SIMT executor's two devices).
template <class Kernel>
void allow_shared_bytes(const char* op, Kernel kernel, size_t bytes) {
  if (bytes <= kDefaultSharedBytes) return;
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, size_t> allowed;  // (device, kernel) -> bytes
  const std::lock_guard<std::mutex> lock(mutex);
  int device = 0, optin_bytes = 0;
  DDP_CUDA_CHECK(cudaGetDevice(&device));
  size_t& allowed_bytes = allowed[{device, reinterpret_cast<const void*>(kernel)}];
  if (bytes <= allowed_bytes) return;
  DDP_CUDA_CHECK(cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  DDP_REQUIRE(bytes <= static_cast<size_t>(optin_bytes),
              std::string(op) + ": needs " + std::to_string(bytes) + " bytes of shared memory per block, the device " +
                  "allows " + std::to_string(optin_bytes) + "; use a smaller head size or the explicit attention path");
  DDP_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  allowed_bytes = bytes;
}

size_t tile_bytes(int head_size) { return static_cast<size_t>(kTile) * (head_size + 1) * sizeof(float); }

// Device scratch of the backward: D [batch_heads, seq_len] FP32.
size_t attention_backward_fused_scratch_bytes(int batch_heads, int seq_len) {
  return static_cast<size_t>(std::max(batch_heads, 0)) * static_cast<size_t>(std::max(seq_len, 0)) * sizeof(float);
}

}  // namespace

void attention_forward_fused_lowp_cuda(CudaOpContext& cuda, const AttentionForwardFused& op) {
  const char* name = op.kName;
  const int seq_len = op.seq_len, head_size = op.head_size;
  const unsigned blocks = flash_grid(name, op.batch_heads, seq_len, head_size);
  if (blocks == 0) return;
  const int tiles = static_cast<int>(blocks_for(seq_len, kTile));
  const size_t shared_bytes = 3 * tile_bytes(head_size);  // q, k, v tiles
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    allow_shared_bytes(name, flash_forward_kernel<C>, shared_bytes);
    launch_kernel<flash_forward_kernel<C>>({blocks, kThreads, shared_bytes, cuda.stream()}, op.q, op.k, op.v, seq_len,
                                           head_size, tiles, op.scale, op.out, op.lse);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

void attention_backward_fused_lowp_cuda(CudaOpContext& cuda, const AttentionBackwardFused& op) {
  const char* name = op.kName;
  const int batch_heads = op.batch_heads, seq_len = op.seq_len, head_size = op.head_size;
  const unsigned blocks = flash_grid(name, batch_heads, seq_len, head_size);
  if (blocks == 0) return;
  const int tiles = static_cast<int>(blocks_for(seq_len, kTile));
  // D [batch_heads, seq_len]
  float* row_d = static_cast<float*>(cuda.scratch(attention_backward_fused_scratch_bytes(batch_heads, seq_len)));
  const long long rows = static_cast<long long>(batch_heads) * seq_len;
  const long long dot_blocks = (rows + kWarps - 1) / kWarps;
  DDP_REQUIRE(dot_blocks <= INT_MAX, std::string(name) + ": too many rows for one grid");
  const size_t dkdv_bytes = 4 * tile_bytes(head_size) + 2 * kTile * sizeof(float);  // k, v, q, dout; lse, D
  const size_t dq_bytes = 4 * tile_bytes(head_size);                                // q, dout, k, v
  with_codec(cuda.precision(), [&](auto codec) {
    using C = decltype(codec);
    launch_kernel<flash_row_dots_kernel<C>>({static_cast<unsigned>(dot_blocks), kThreads, 0, cuda.stream()}, op.dout,
                                            op.out, rows, head_size, row_d);
    DDP_CUDA_CHECK_LAUNCH();
    allow_shared_bytes(name, flash_backward_dkdv_kernel<C>, dkdv_bytes);
    launch_kernel<flash_backward_dkdv_kernel<C>>({blocks, kThreads, dkdv_bytes, cuda.stream()}, op.q, op.k, op.v,
                                                 op.lse, row_d, op.dout, seq_len, head_size, tiles, op.scale, op.dk,
                                                 op.dv);
    DDP_CUDA_CHECK_LAUNCH();
    allow_shared_bytes(name, flash_backward_dq_kernel<C>, dq_bytes);
    launch_kernel<flash_backward_dq_kernel<C>>({blocks, kThreads, dq_bytes, cuda.stream()}, op.q, op.k, op.v, op.lse,
                                               row_d, op.dout, seq_len, head_size, tiles, op.scale, op.dq);
  });
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp
