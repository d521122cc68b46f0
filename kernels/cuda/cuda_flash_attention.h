// cuda_flash_attention.h: launchers of CudaBackend's fused causal attention
// (transformer_ops.h: attention_forward_fused_lowp,
// attention_backward_fused_lowp; semantics and the numerics contract are
// those methods'). Kernels: cuda_flash_attention.cu. Plain C++: g++ can
// include it.
//
// Our own kernels, not cuDNN's fused SDPA: the GPU host's kit
// (shared/gpu-kit) names neither cuDNN nor its frontend (nor is the
// frontend installed on the build machine), so a cuDNN path could not be
// relied on to build or to be tested there. 16-bit in (precision p), FP32 math on CUDA cores
// (tiles of kFlashCudaTile rows in shared memory), one rounding per output.
// Deterministic: no atomics; dk/dv are summed per key tile and dq per query
// tile in a separate kernel, each sum in an order fixed by the shapes.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/lowp_codec.h"

namespace ddp {

// Query rows and key rows per tile (one key per lane of a warp).
constexpr int kFlashCudaTile = 32;
// Each lane holds its rows' accumulators for head_size / 32 dimensions in
// registers: head sizes above this are refused (the explicit attention
// path has no such limit).
constexpr int kFlashCudaMaxHeadSize = 128;

void launch_attention_forward_fused_lowp(cudaStream_t stream, Precision p, const lowp16* q, const lowp16* k,
                                         const lowp16* v, int batch_heads, int seq_len, int head_size, float scale,
                                         lowp16* out, float* lse);
// Device scratch of the backward: D [batch_heads, seq_len] FP32.
size_t attention_backward_fused_scratch_bytes(int batch_heads, int seq_len);
void launch_attention_backward_fused_lowp(cudaStream_t stream, Precision p, const lowp16* q, const lowp16* k,
                                          const lowp16* v, const lowp16* out, const float* lse, const lowp16* dout,
                                          int batch_heads, int seq_len, int head_size, float scale, lowp16* dq,
                                          lowp16* dk, lowp16* dv, void* scratch);

}  // namespace ddp
