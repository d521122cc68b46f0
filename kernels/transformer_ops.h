// transformer_ops.h: the transformer family of the Backend (backend.h):
// the GPT's embedding, LayerNorm, causal softmax, head layout, the
// incremental decoder's attention against cached keys and values, and the
// fused (FlashAttention-style) causal attention forward and backward.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/transformer_math.h"

namespace ddp {

// Implemented by each backend (cpu_transformer.h, cuda_transformer.h).
class TransformerOps {
 public:
  virtual ~TransformerOps() = default;

  // FP16 storage, FP32 arithmetic inside each operation, one rounding to
  // FP16 per output; every reduction runs in an order fixed by the shapes
  // (no atomics), so each backend gives the same bits run to run. The
  // per-element math is transformer_math.h. B = batch, T = seq_len,
  // C = channels, nh = heads, hs = head_size (C = nh * hs).
  //
  // out[b*T + t, c] = fp16(wte[tokens[b*T + t], c] + wpe[t, c]) (FP32 add).
  // tokens [B*T] int32, wte [vocab, C], wpe [>= T, C], out [B*T, C]. A token
  // outside [0, vocab) gives a NaN row (a kernel cannot throw).
  virtual void embedding_forward_lowp(const int32_t* tokens, const lowp16* wte, const lowp16* wpe, int batch,
                                      int seq_len, int channels, int vocab, lowp16* out) = 0;
  // d_wte[v, c] = fp16(sum over rows r with tokens[r] == v of dout[r, c]),
  // the FP32 sum in increasing r; rows of tokens that do not occur become 0.
  // d_wpe[t, c] = fp16(sum_b dout[b*T + t, c]), in increasing b. With
  // accumulate, each sum starts from the FP16 value already there (FP32
  // add, then the one rounding): the GPT's tied LM head writes its weight
  // gradient into d_wte with its GEMM first, and this adds the embedding's
  // part, so the lm_head part is rounded twice (by the GEMM, then here) and
  // the embedding part once. Tokens outside [0, vocab) add nothing.
  virtual void embedding_backward_lowp(const int32_t* tokens, const lowp16* dout, int batch, int seq_len, int channels,
                                       int vocab, lowp16* d_wte, lowp16* d_wpe, bool accumulate) = 0;
  // y[r, :] = fp16((x[r, :] - mean_r) * rstd_r * gamma + beta), mean_r and
  // the biased variance in FP32 over the row, rstd_r = 1/sqrt(var + eps)
  // (nn.LayerNorm). mean/rstd [rows] FP32 are kept for the backward.
  virtual void layernorm_forward_lowp(const lowp16* x, const lowp16* gamma, const lowp16* beta, int rows, int cols,
                                      float eps, lowp16* y, float* mean, float* rstd) = 0;
  // dx = fp16(LayerNorm's input gradient (transformer_math.h:
  // layernorm_dx) (+ dx when accumulate_dx: the residual stream's gradient
  // the block's output already put there)); dgamma[c] = fp16(sum_r dy xhat),
  // dbeta[c] = fp16(sum_r dy) (+ their FP16 values when accumulate_params),
  // FP32 column sums in an order fixed by rows.
  virtual void layernorm_backward_lowp(const lowp16* dy, const lowp16* x, const lowp16* gamma, const float* mean,
                                       const float* rstd, int rows, int cols, lowp16* dx, bool accumulate_dx,
                                       lowp16* dgamma, lowp16* dbeta, bool accumulate_params) = 0;
  // probs[z, i, j] = fp16(softmax over j <= i of scale * scores[z, i, j]),
  // exactly 0 for j > i; scores, probs [batch_heads, T, T]; FP32 max, exp,
  // sum. probs may equal scores.
  virtual void causal_softmax_forward_lowp(const lowp16* scores, int batch_heads, int seq_len, float scale,
                                           lowp16* probs) = 0;
  // dscores = fp16(scale * p * (dp - sum_{j<=i} p dp)) for j <= i, exactly 0
  // for j > i (transformer_math.h: causal_softmax_grad), from the FP16
  // probabilities the forward wrote. dscores may equal dprobs.
  virtual void causal_softmax_backward_lowp(const lowp16* probs, const lowp16* dprobs, int batch_heads, int seq_len,
                                            float scale, lowp16* dscores) = 0;
  // Head split: heads[b, h, t, d] = rows[(b*T + t) * row_stride + h*hs + d],
  // rows viewed as [B, T, row_stride] of which the first nh*hs columns are
  // read (point at q, k or v inside qkv [B, T, 3C] with row_stride 3C); heads
  // [B, nh, T, hs]. Also the backward of heads_to_rows_lowp. A copy: exact.
  virtual void rows_to_heads_lowp(const lowp16* rows, int row_stride, int batch, int seq_len, int heads, int head_size,
                                  lowp16* heads_out) = 0;
  // Head merge, the inverse: rows[(b*T + t) * row_stride + h*hs + d] =
  // heads[b, h, t, d]; columns of rows beyond nh*hs are not touched. The
  // attention output y [B, nh, T, hs] -> [B, T, C], and the backward of the
  // split (dq, dk, dv into dqkv).
  virtual void heads_to_rows_lowp(const lowp16* heads_in, int batch, int seq_len, int heads, int head_size,
                                  lowp16* rows, int row_stride) = 0;
  // Attention of new_len new positions against a cache of keys and values
  // (the GPT's incremental decoder, gpt_decoder.h), with the rounding points
  // of the full path (rows_to_heads, the q k^T GEMM, the causal softmax, the
  // P v GEMM) so a decoded position gets the bits, or nearly, of the same
  // position in a whole-window forward. Rows are position-major with head h
  // at columns h*hs .. h*hs + hs - 1: q [new_len, q_stride] (q inside qkv:
  // q_stride 3C), k_cache and v_cache [past_len + new_len, kv_stride] with
  // the new positions' keys and values already at rows past_len onward, out
  // [new_len, out_stride] (merged heads, c_proj's input). Query i sits at
  // position past_len + i and sees the positions j <= past_len + i:
  //   s_j = fp16(q_i . k_j)                 FP32 products summed in increasing d
  //   p_j = fp16(softmax_j(scale * s_j))    FP32 max, exp, sum: as causal_softmax_forward_lowp
  //   out_i[d] = fp16(sum_j p_j v_j[d])     FP32, summed in increasing j
  // Per (query, head); the sums' order is fixed by the shapes, so each
  // backend gives the same bits run to run.
  virtual void attention_decode_lowp(const lowp16* q, int q_stride, const lowp16* k_cache, const lowp16* v_cache,
                                     int kv_stride, int heads, int head_size, int past_len, int new_len, float scale,
                                     lowp16* out, int out_stride) = 0;

  // ---- Fused causal attention (FlashAttention-2) ----
  // q, k, v, out, dout, dq, dk, dv [batch_heads, T, hs] FP16 (rows_to_heads'
  // layout, bh = batch * heads); lse [batch_heads, T] FP32. What the explicit
  // path (the q k^T batched GEMM, causal_softmax_*_lowp, the P v GEMM) writes
  // as [bh, T, T] FP16 scores and probabilities is never materialised: the
  // kernels go over (query tile, key tile) pairs, skipping the pairs above
  // the diagonal, and keep per query row only the output and its FP32
  // log-sum-exp (memory: attention_fused_saved_bytes below).
  //
  // Forward, per query row i, everything FP32 until the one rounding of out:
  //   s_ij = scale * (q_i . k_j)        for j <= i; keys j > i never read
  //   per key tile, in increasing tile order (online softmax):
  //     m' = max(m, max_j s_ij);  c = e^(m - m')  (0 on the first tile)
  //     p_ij = e^(s_ij - m');  l = c * l + sum_j p_ij;  o = c * o + sum_j p_ij v_j;  m = m'
  //   out_i = fp16(o / l);  lse_i = m + ln(l)  (the log-sum-exp of the scaled scores)
  // The FP16 q, k, v widen exactly; no score or probability is rounded to
  // FP16 (the explicit path rounds q k^T and P to FP16, so the two differ by
  // those roundings; the tests bound both against a double reference).
  virtual void attention_forward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, int batch_heads,
                                            int seq_len, int head_size, float scale, lowp16* out, float* lse) = 0;
  // Backward from the forward's out and lse: probabilities are recomputed
  // tile by tile, p_ij = e^(scale * (q_i . k_j) - lse_i) (FP32), never stored.
  //   D_i   = sum_d dout_i[d] * out_i[d]          (FP32, from the FP16 out)
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
  virtual void attention_backward_fused_lowp(const lowp16* q, const lowp16* k, const lowp16* v, const lowp16* out,
                                             const float* lse, const lowp16* dout, int batch_heads, int seq_len,
                                             int head_size, float scale, lowp16* dq, lowp16* dk, lowp16* dv) = 0;
};

// What one attention layer keeps from its forward for its backward beyond
// q, k, v (which both paths keep), in bytes. Fused: out [bh, T, hs] FP16
// and lse [bh, T] FP32. Explicit: the probabilities [bh, T, T] FP16 (and
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
