// cpu_flash_attention.h: CpuBackend's fused causal attention
// (transformer_ops.h: attention_forward_fused_lowp and
// attention_backward_fused_lowp; semantics, argument order and the
// numerics contract are those methods').
//
// The work is cut into (batch_head, tile) items of kFlashTile query rows
// (forward, the backward's dq pass) or key rows (the backward's dk/dv pass);
// each item owns its output rows and visits its tile pairs in increasing
// tile order, so an item's bits are the same whichever thread of
// CpuBackend's pool takes it: the results do not depend on the thread
// count. Tile products are cblas_sgemm calls on FP32 copies of the tiles
// (the FP16 inputs widen exactly), single-threaded inside the pool's
// threads, and always of the same shape for the same tile pair.
#pragma once

#include "kernels/cpu/cpu_thread_pool.h"
#include "kernels/lowp_codec.h"

namespace ddp::cpu {

// Query rows and key rows per tile: a 64 x 64 FP32 score tile is 16 KB, and
// with the 64-row operand tiles and the item's accumulators it stays in L2
// at the GPT's head sizes. Not tuned beyond that.
constexpr int kFlashTile = 64;

void attention_forward_fused(Precision p, CpuThreadPool& pool, const lowp16* q, const lowp16* k, const lowp16* v,
                             int batch_heads, int seq_len, int head_size, float scale, lowp16* out, float* lse);
void attention_backward_fused(Precision p, CpuThreadPool& pool, const lowp16* q, const lowp16* k, const lowp16* v,
                              const lowp16* out, const float* lse, const lowp16* dout, int batch_heads, int seq_len,
                              int head_size, float scale, lowp16* dq, lowp16* dk, lowp16* dv);

}  // namespace ddp::cpu
