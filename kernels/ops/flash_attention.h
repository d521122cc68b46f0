// flash_attention.h: fused causal attention (FlashAttention-2), forward and
// backward. q, k, v, out, dout, dq, dk, dv are [batch_heads, T, hs] 16-bit
// (rows_to_heads' layout, bh = batch * heads); lse [batch_heads, T] FP32.
// What the explicit path (the q k^T batched GEMM, causal_softmax_*_lowp, the
// P v GEMM) writes as [bh, T, T] scores and probabilities is never
// materialised: the rows go over (query tile, key tile) pairs, skipping the
// pairs above the diagonal, and keep per query row only the output and its
// FP32 log-sum-exp (memory: attention_fused_saved_bytes below). CPU: 64x64
// tiles over cblas_sgemm; CUDA: 32x32 tiles in shared memory.
#pragma once

#include <cstddef>

#include "kernels/lowp16.h"
#include "kernels/ops/op_dispatch.h"

namespace ddp {

// Per query row i, everything FP32 until the one rounding of out:
//   s_ij = scale * (q_i . k_j)        for j <= i; keys j > i never read
//   per key tile, in increasing tile order (online softmax):
//     m' = max(m, max_j s_ij);  c = e^(m - m')  (0 on the first tile)
//     p_ij = e^(s_ij - m');  l = c * l + sum_j p_ij;  o = c * o + sum_j p_ij v_j;  m = m'
//   out_i = fp16(o / l);  lse_i = m + ln(l)  (the log-sum-exp of the scaled scores)
// The 16-bit q, k, v widen exactly; no score or probability is rounded to
// 16 bits (the explicit path rounds q k^T and P, so the two differ by those
// roundings; the tests bound both against a double reference).
struct AttentionForwardFused {
  static constexpr const char* kName = "attention_forward_fused_lowp";
  const lowp16* q = nullptr;
  const lowp16* k = nullptr;
  const lowp16* v = nullptr;
  int batch_heads = 0;
  int seq_len = 0;
  int head_size = 0;
  float scale = 1.0f;
  lowp16* out = nullptr;
  float* lse = nullptr;
};
void attention_forward_fused_lowp_cpu(CpuBackend& cpu, const AttentionForwardFused& op);
void attention_forward_fused_lowp_cuda(CudaOpContext& cuda, const AttentionForwardFused& op);
inline void attention_forward_fused_lowp(Backend& backend, const AttentionForwardFused& op) {
  run_op(backend, op, attention_forward_fused_lowp_cpu, DDP_CUDA_ROW(attention_forward_fused_lowp_cuda));
}

// Backward from the forward's out and lse: probabilities are recomputed
// tile by tile, p_ij = e^(scale * (q_i . k_j) - lse_i) (FP32), never stored.
//   D_i   = sum_d dout_i[d] * out_i[d]          (FP32, from the 16-bit out)
//   dp_ij = dout_i . v_j;  ds_ij = p_ij * (dp_ij - D_i)
//   dv_j = fp16(sum_{i>=j} p_ij dout_i)
//   dk_j = fp16(scale * sum_{i>=j} ds_ij q_i)
//   dq_i = fp16(scale * sum_{j<=i} ds_ij k_j)
// The sums are FP32, over tiles in increasing tile order, the scale
// applied once after the sum, then the one rounding. dk and dv are summed
// per key tile (over the query tiles), dq per query tile in a separate
// pass (over the key tiles): every output has one owner, no atomics, an
// order fixed by the shapes, so the bits do not depend on the thread count
// or the run.
struct AttentionBackwardFused {
  static constexpr const char* kName = "attention_backward_fused_lowp";
  const lowp16* q = nullptr;
  const lowp16* k = nullptr;
  const lowp16* v = nullptr;
  const lowp16* out = nullptr;
  const float* lse = nullptr;
  const lowp16* dout = nullptr;
  int batch_heads = 0;
  int seq_len = 0;
  int head_size = 0;
  float scale = 1.0f;
  lowp16* dq = nullptr;
  lowp16* dk = nullptr;
  lowp16* dv = nullptr;
};
void attention_backward_fused_lowp_cpu(CpuBackend& cpu, const AttentionBackwardFused& op);
void attention_backward_fused_lowp_cuda(CudaOpContext& cuda, const AttentionBackwardFused& op);
inline void attention_backward_fused_lowp(Backend& backend, const AttentionBackwardFused& op) {
  run_op(backend, op, attention_backward_fused_lowp_cpu, DDP_CUDA_ROW(attention_backward_fused_lowp_cuda));
}

// The CUDA row's largest head size: each lane holds its rows' accumulators
// for head_size / 32 dimensions in registers, so head sizes above this are
// refused with a ddp::Error naming it (the explicit attention path has no
// such limit; the CPU row has none either).
constexpr int kFlashCudaMaxHeadSize = 128;

// What one attention layer keeps from its forward for its backward beyond
// q, k, v (which both paths keep), in bytes. Fused: out [bh, T, hs] 16-bit
// and lse [bh, T] FP32. Explicit: the probabilities [bh, T, T] 16-bit (and
// the backward's d_scores scratch of the same size, which the fused path
// does not need either; not counted here).
inline size_t attention_fused_saved_bytes(int batch_heads, int seq_len, int head_size) {
  const size_t rows = static_cast<size_t>(batch_heads) * static_cast<size_t>(seq_len);
  return rows * static_cast<size_t>(head_size) * sizeof(lowp16) + rows * sizeof(float);
}
inline size_t attention_explicit_probs_bytes(int batch_heads, int seq_len) {
  return static_cast<size_t>(batch_heads) * static_cast<size_t>(seq_len) * static_cast<size_t>(seq_len) *
         sizeof(lowp16);
}

}  // namespace ddp
