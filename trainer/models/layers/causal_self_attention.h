// causal_self_attention.h: nanoGPT's CausalSelfAttention on a Backend: the
// qkv projection c_attn (C -> 3C), nh heads of size hs = C / nh with the
// causal softmax of their scaled scores, and the output projection c_proj
// (C -> C). Rows are `batch` windows of `context` tokens, R = batch x T:
//   qkv = x W_attn^T + b;  q, k, v [B, nh, T, hs] split from it
//   P = causal_softmax(q k^T / sqrt(hs))   [B, nh, T, T], kept for backward
//   y = merge(P v)                         [R, C]
//   out = y W_proj^T + b
// Backward runs the lines in reverse; the probabilities are the forward's.
// qkv is scratch at every --recompute level (backward reads q, k, v, not
// qkv); q, k, v, P and the merged rows are the layer's own (none, light)
// or shared by every block (block: the block's recompute re-runs forward).
// --attention fused (attention_path.h) computes P v by FlashAttention's
// tiles instead: the layer keeps each query row's FP32 log-sum-exp in place
// of P, and backward re-derives the heads' output from the merged rows (a
// copy) and recomputes P tile by tile; no [B, nh, T, T] buffer exists.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "kernels/ops/head_layout.h"
#include "trainer/models/layers/attention_path.h"
#include "trainer/models/layers/linear_layer.h"
#include "trainer/models/layers/tensor_range.h"
#include "trainer/params/parameter_registry.h"
#include "trainer/params/tensor_table.h"

namespace ddp {

// Elements of the attention's buffers at `max_batch` windows, by path:
// explicit keeps P and needs dS ([B, nh, T, T] each), fused keeps the
// log-sum-exp [B, nh, T] and needs the heads' output [B, nh, T, hs].
struct AttentionSizes {
  AttentionSizes(int channels, int heads, int context, int max_batch, AttentionPath path);
  AttentionPath path;
  size_t rows_channels;  // R x C
  size_t scores;         // explicit: B nh T^2; fused 0
  size_t lse;            // fused: B nh T; explicit 0
  size_t out_heads;      // fused: R x C; explicit 0
};

// Buffers every block's attention uses in turn (one block runs at a time),
// owned by the model.
struct AttentionScratch {
  AttentionScratch(Backend& backend, const AttentionSizes& sizes);
  size_t size_bytes() const {
    return heads.size_bytes() + d_q.size_bytes() + d_k.size_bytes() + d_v.size_bytes() + d_scores.size_bytes() +
           d_rows.size_bytes() + d_qkv.size_bytes() + qkv.size_bytes() + out_heads.size_bytes();
  }
  Buffer<lowp16> heads;      // [B, nh, T, hs]: the heads' output P v in forward, dy split into heads in backward
  Buffer<lowp16> d_q;        // [B, nh, T, hs]
  Buffer<lowp16> d_k;        // [B, nh, T, hs]
  Buffer<lowp16> d_v;        // [B, nh, T, hs]
  Buffer<lowp16> d_scores;   // [B, nh, T, T]: dP, then the scores' gradient in place
  Buffer<lowp16> d_rows;     // [R, C]: c_proj's input gradient
  Buffer<lowp16> d_qkv;      // [R, 3C]: c_attn's output gradient
  Buffer<lowp16> qkv;        // [R, 3C]: c_attn's output, split into q, k, v before anything else runs
  Buffer<lowp16> out_heads;  // fused: [B, nh, T, hs], the heads' output again for backward (else empty)
};

// What the attention's backward reads of its forward (besides its input x).
struct AttentionActivations {
  AttentionActivations(Backend& backend, const AttentionSizes& sizes);
  size_t size_bytes() const {
    return q.size_bytes() + k.size_bytes() + v.size_bytes() + probs.size_bytes() + attn_rows.size_bytes() +
           lse.size_bytes();
  }
  Buffer<lowp16> q;          // [B, nh, T, hs]
  Buffer<lowp16> k;          // [B, nh, T, hs]
  Buffer<lowp16> v;          // [B, nh, T, hs]
  Buffer<lowp16> probs;      // explicit: [B, nh, T, T], the scores, then the softmax in place (else empty)
  Buffer<lowp16> attn_rows;  // [R, C]: y merged, c_proj's input
  Buffer<float> lse;         // fused: [B, nh, T], each query row's log-sum-exp (else empty)
};

class CausalSelfAttention {
 public:
  // shared: where forward writes what backward reads (null: buffers of its
  // own). path: Explicit or Fused (resolved, attention_path.h).
  CausalSelfAttention(Backend& backend, int channels, int heads, int context, int max_batch, AttentionPath path,
                      AttentionActivations* shared = nullptr);

  // `<prefix>c_attn` and `<prefix>c_proj` (nn.Linear tensors), adjacent in the registry.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return tensors_; }

  // out [R, C] from x [R, C] (kept: c_attn's weight gradient reads it).
  void forward(const lowp16* x, int batch, const WeightTable& weights_lowp, AttentionScratch& scratch, lowp16* out);
  // From d_out [R, C]: the weights' and biases' gradients written or added
  // (accumulate), dx [R, C] written.
  void backward(const lowp16* d_out, int batch, const WeightTable& weights_lowp, const GradTable& grads_lowp,
                bool accumulate, AttentionScratch& scratch, lowp16* dx) const;
  // The bytes of its own buffers (0 when shared).
  size_t owned_bytes() const { return owned_ ? owned_->size_bytes() : 0; }

 private:
  void heads_forward(int batch, AttentionScratch& scratch);
  void heads_backward(const lowp16* d_rows, int batch, AttentionScratch& scratch) const;
  void heads_forward_fused(int batch, AttentionScratch& scratch);
  void heads_backward_fused(const lowp16* d_rows, int batch, AttentionScratch& scratch) const;
  // q, k, v split from qkv's rows; dq, dk, dv merged into d_qkv's.
  void split_qkv(int batch, const AttentionScratch& scratch);
  void merge_d_qkv(int batch, AttentionScratch& scratch) const;
  // The head split and merge of `batch` windows with this layer's T, nh and
  // hs; the caller sets the pointers and the row stride.
  RowsToHeads head_split(int batch) const;
  HeadsToRows head_merge(int batch) const;

  Backend& backend_;
  int channels_;
  int heads_;
  int head_size_;
  int context_;
  AttentionSizes sizes_;
  LinearLayer c_attn_;
  LinearLayer c_proj_;
  TensorRange tensors_;
  const lowp16* input_ = nullptr;                // x of the last forward
  std::unique_ptr<AttentionActivations> owned_;  // null when shared (on the heap: a moved layer's views stay valid)
  AttentionActivations* kept_;                   // owned_ or the shared buffers
  // kept_'s buffers under the names forward and backward use.
  Buffer<lowp16>& q_;          // [B, nh, T, hs]
  Buffer<lowp16>& k_;          // [B, nh, T, hs]
  Buffer<lowp16>& v_;          // [B, nh, T, hs]
  Buffer<lowp16>& probs_;      // explicit: [B, nh, T, T], the scores, then the softmax in place
  Buffer<lowp16>& attn_rows_;  // [R, C]: y merged, c_proj's input
  Buffer<float>& lse_;         // fused: [B, nh, T]
};

}  // namespace ddp
