// causal_self_attention.cpp
#include "trainer/models/layers/causal_self_attention.h"

#include <cmath>

#include "kernels/error.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/flash_attention.h"
#include "kernels/ops/head_layout.h"
#include "trainer/models/layers/gemm_calls.h"

namespace ddp {

AttentionSizes::AttentionSizes(int channels, int heads, int context, int max_batch, AttentionPath p)
    : path(p),
      rows_channels(static_cast<size_t>(max_batch) * context * channels),
      scores(p == AttentionPath::Explicit ? static_cast<size_t>(max_batch) * heads * context * context : 0),
      lse(p == AttentionPath::Fused ? static_cast<size_t>(max_batch) * heads * context : 0),
      out_heads(p == AttentionPath::Fused ? rows_channels : 0) {
  DDP_REQUIRE(p == AttentionPath::Explicit || p == AttentionPath::Fused,
              "AttentionSizes: resolve --attention auto for the device first");
}

AttentionScratch::AttentionScratch(Backend& backend, const AttentionSizes& sizes)
    : heads(backend, sizes.rows_channels),
      d_q(backend, sizes.rows_channels),
      d_k(backend, sizes.rows_channels),
      d_v(backend, sizes.rows_channels),
      d_scores(backend, sizes.scores),
      d_rows(backend, sizes.rows_channels),
      d_qkv(backend, 3 * sizes.rows_channels),
      qkv(backend, 3 * sizes.rows_channels),
      out_heads(backend, sizes.out_heads) {}

AttentionActivations::AttentionActivations(Backend& backend, const AttentionSizes& sizes)
    : q(backend, sizes.rows_channels),
      k(backend, sizes.rows_channels),
      v(backend, sizes.rows_channels),
      probs(backend, sizes.scores),
      attn_rows(backend, sizes.rows_channels),
      lse(backend, sizes.lse) {}

CausalSelfAttention::CausalSelfAttention(Backend& backend, int channels, int heads, int context, int max_batch,
                                         AttentionPath path, AttentionActivations* shared)
    : backend_(backend),
      channels_(channels),
      heads_(heads),
      head_size_(channels / heads),
      context_(context),
      sizes_(channels, heads, context, max_batch, path),
      c_attn_(channels, 3 * channels),
      c_proj_(channels, channels),
      owned_(shared != nullptr ? nullptr : std::make_unique<AttentionActivations>(backend, sizes_)),
      kept_(shared != nullptr ? shared : owned_.get()),
      q_(kept_->q),
      k_(kept_->k),
      v_(kept_->v),
      probs_(kept_->probs),
      attn_rows_(kept_->attn_rows),
      lse_(kept_->lse) {
  DDP_REQUIRE(heads > 0 && channels % heads == 0, "CausalSelfAttention: the heads must divide the channels");
  DDP_REQUIRE(probs_.count() >= sizes_.scores && lse_.count() >= sizes_.lse && q_.count() >= sizes_.rows_channels,
              "CausalSelfAttention: the shared buffers are too small");
}

void CausalSelfAttention::bind(const ParameterRegistry& registry, const std::string& prefix) {
  c_attn_.bind(registry, prefix + "c_attn");
  c_proj_.bind(registry, prefix + "c_proj");
  tensors_ = joined(c_proj_.tensors(), c_attn_.tensors());
}

void CausalSelfAttention::forward(const lowp16* x, int batch, const WeightTable& weights_lowp,
                                  AttentionScratch& scratch, lowp16* out) {
  input_ = x;
  const int rows = batch * context_;
  c_attn_.forward(backend_, x, rows, weights_lowp, scratch.qkv.data(), Activation::None, nullptr);
  if (sizes_.path == AttentionPath::Fused)
    heads_forward_fused(batch, scratch);
  else
    heads_forward(batch, scratch);
  c_proj_.forward(backend_, attn_rows_.data(), rows, weights_lowp, out, Activation::None, nullptr);
}

void CausalSelfAttention::heads_forward(int batch, AttentionScratch& scratch) {
  const int T = context_, nh = heads_, hs = head_size_, c = channels_;
  split_qkv(batch, scratch);
  const int z = batch * nh;
  const int64_t th = static_cast<int64_t>(T) * hs;
  const int64_t tt = static_cast<int64_t>(T) * T;
  // scores[z] [T, T] = q[z] k[z]^T (the 1/sqrt(hs) is the softmax's)
  GemmBatchedLowp scores;
  scores.gemm = gemm_nt(T, T, hs, q_.data(), hs, k_.data(), hs, probs_.data(), T);
  scores.batch_count = z;
  scores.stride_a = th;
  scores.stride_b = th;
  scores.stride_c = tt;
  gemm_batched_lowp(backend_, scores);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  CausalSoftmaxForward softmax;
  softmax.scores = probs_.data();
  softmax.batch_heads = z;
  softmax.seq_len = T;
  softmax.scale = scale;
  softmax.probs = probs_.data();
  causal_softmax_forward_lowp(backend_, softmax);
  // y[z] [T, hs] = P[z] v[z]
  GemmBatchedLowp head_out;
  head_out.gemm = gemm_nn(T, hs, T, probs_.data(), T, v_.data(), hs, scratch.heads.data(), hs);
  head_out.batch_count = z;
  head_out.stride_a = tt;
  head_out.stride_b = th;
  head_out.stride_c = th;
  gemm_batched_lowp(backend_, head_out);
  HeadsToRows merge = head_merge(batch);
  merge.heads_in = scratch.heads.data();
  merge.rows = attn_rows_.data();
  merge.row_stride = c;
  heads_to_rows_lowp(backend_, merge);
}

void CausalSelfAttention::backward(const lowp16* d_out, int batch, const WeightTable& weights_lowp,
                                   const GradTable& grads_lowp, bool accumulate, AttentionScratch& scratch,
                                   lowp16* dx) const {
  DDP_REQUIRE(input_ != nullptr, "CausalSelfAttention::backward before forward");
  const int rows = batch * context_;
  c_proj_.backward_weights(backend_, d_out, attn_rows_.data(), rows, grads_lowp, accumulate);
  c_proj_.backward_input(backend_, d_out, rows, weights_lowp, scratch.d_rows.data(), Activation::None, nullptr);
  if (sizes_.path == AttentionPath::Fused)
    heads_backward_fused(scratch.d_rows.data(), batch, scratch);
  else
    heads_backward(scratch.d_rows.data(), batch, scratch);
  c_attn_.backward_weights(backend_, scratch.d_qkv.data(), input_, rows, grads_lowp, accumulate);
  c_attn_.backward_input(backend_, scratch.d_qkv.data(), rows, weights_lowp, dx, Activation::None, nullptr);
}

void CausalSelfAttention::heads_backward(const lowp16* d_rows, int batch, AttentionScratch& scratch) const {
  const int T = context_, nh = heads_, hs = head_size_, c = channels_;
  const int z = batch * nh;
  const int64_t th = static_cast<int64_t>(T) * hs;
  const int64_t tt = static_cast<int64_t>(T) * T;
  lowp16* dy = scratch.heads.data();
  lowp16* d_scores = scratch.d_scores.data();
  RowsToHeads split = head_split(batch);
  split.rows = d_rows;
  split.row_stride = c;
  split.heads_out = dy;
  rows_to_heads_lowp(backend_, split);  // dy [z, T, hs]
  // dP[z] [T, T] = dy[z] v[z]^T
  GemmBatchedLowp d_probs;
  d_probs.gemm = gemm_nt(T, T, hs, dy, hs, v_.data(), hs, d_scores, T);
  d_probs.batch_count = z;
  d_probs.stride_a = th;
  d_probs.stride_b = th;
  d_probs.stride_c = tt;
  gemm_batched_lowp(backend_, d_probs);
  // dv[z] [T, hs] = P[z]^T dy[z]
  GemmBatchedLowp d_v;
  d_v.gemm = gemm_tn(T, hs, T, probs_.data(), T, dy, hs, scratch.d_v.data(), hs);
  d_v.batch_count = z;
  d_v.stride_a = tt;
  d_v.stride_b = th;
  d_v.stride_c = th;
  gemm_batched_lowp(backend_, d_v);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  CausalSoftmaxBackward softmax;
  softmax.probs = probs_.data();
  softmax.dprobs = d_scores;
  softmax.batch_heads = z;
  softmax.seq_len = T;
  softmax.scale = scale;
  softmax.dscores = d_scores;
  causal_softmax_backward_lowp(backend_, softmax);  // dS, in place
  // dq[z] [T, hs] = dS[z] k[z]
  GemmBatchedLowp d_q;
  d_q.gemm = gemm_nn(T, hs, T, d_scores, T, k_.data(), hs, scratch.d_q.data(), hs);
  d_q.batch_count = z;
  d_q.stride_a = tt;
  d_q.stride_b = th;
  d_q.stride_c = th;
  gemm_batched_lowp(backend_, d_q);
  // dk[z] [T, hs] = dS[z]^T q[z]
  GemmBatchedLowp d_k;
  d_k.gemm = gemm_tn(T, hs, T, d_scores, T, q_.data(), hs, scratch.d_k.data(), hs);
  d_k.batch_count = z;
  d_k.stride_a = tt;
  d_k.stride_b = th;
  d_k.stride_c = th;
  gemm_batched_lowp(backend_, d_k);
  merge_d_qkv(batch, scratch);
}

// The same heads, split and merged as above, through the fused op.
void CausalSelfAttention::heads_forward_fused(int batch, AttentionScratch& scratch) {
  const int T = context_, nh = heads_, hs = head_size_, c = channels_;
  split_qkv(batch, scratch);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  AttentionForwardFused attention;
  attention.q = q_.data();
  attention.k = k_.data();
  attention.v = v_.data();
  attention.batch_heads = batch * nh;
  attention.seq_len = T;
  attention.head_size = hs;
  attention.scale = scale;
  attention.out = scratch.heads.data();
  attention.lse = lse_.data();
  attention_forward_fused_lowp(backend_, attention);
  HeadsToRows merge = head_merge(batch);
  merge.heads_in = scratch.heads.data();
  merge.rows = attn_rows_.data();
  merge.row_stride = c;
  heads_to_rows_lowp(backend_, merge);
}

void CausalSelfAttention::heads_backward_fused(const lowp16* d_rows, int batch, AttentionScratch& scratch) const {
  const int T = context_, nh = heads_, hs = head_size_, c = channels_;
  lowp16* dy = scratch.heads.data();
  RowsToHeads split = head_split(batch);
  split.row_stride = c;
  split.rows = d_rows;
  split.heads_out = dy;
  rows_to_heads_lowp(backend_, split);
  // The forward's output in heads layout: the merged rows split again (a
  // copy, so the bits the forward wrote).
  split.rows = attn_rows_.data();
  split.heads_out = scratch.out_heads.data();
  rows_to_heads_lowp(backend_, split);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  AttentionBackwardFused attention;
  attention.q = q_.data();
  attention.k = k_.data();
  attention.v = v_.data();
  attention.out = scratch.out_heads.data();
  attention.lse = lse_.data();
  attention.dout = dy;
  attention.batch_heads = batch * nh;
  attention.seq_len = T;
  attention.head_size = hs;
  attention.scale = scale;
  attention.dq = scratch.d_q.data();
  attention.dk = scratch.d_k.data();
  attention.dv = scratch.d_v.data();
  attention_backward_fused_lowp(backend_, attention);
  merge_d_qkv(batch, scratch);
}

// q, k, v [z, T, hs] from the rows of qkv [B, T, 3C].
void CausalSelfAttention::split_qkv(int batch, const AttentionScratch& scratch) {
  const int c = channels_;
  RowsToHeads split = head_split(batch);
  split.row_stride = 3 * c;
  split.rows = scratch.qkv.data();
  split.heads_out = q_.data();
  rows_to_heads_lowp(backend_, split);
  split.rows = scratch.qkv.data() + c;
  split.heads_out = k_.data();
  rows_to_heads_lowp(backend_, split);
  split.rows = scratch.qkv.data() + 2 * c;
  split.heads_out = v_.data();
  rows_to_heads_lowp(backend_, split);
}

// dq, dk, dv [z, T, hs] into the rows of d_qkv [B, T, 3C].
void CausalSelfAttention::merge_d_qkv(int batch, AttentionScratch& scratch) const {
  const int c = channels_;
  HeadsToRows merge = head_merge(batch);
  merge.row_stride = 3 * c;
  merge.heads_in = scratch.d_q.data();
  merge.rows = scratch.d_qkv.data();
  heads_to_rows_lowp(backend_, merge);
  merge.heads_in = scratch.d_k.data();
  merge.rows = scratch.d_qkv.data() + c;
  heads_to_rows_lowp(backend_, merge);
  merge.heads_in = scratch.d_v.data();
  merge.rows = scratch.d_qkv.data() + 2 * c;
  heads_to_rows_lowp(backend_, merge);
}

RowsToHeads CausalSelfAttention::head_split(int batch) const {
  RowsToHeads split;
  split.batch = batch;
  split.seq_len = context_;
  split.heads = heads_;
  split.head_size = head_size_;
  return split;
}

HeadsToRows CausalSelfAttention::head_merge(int batch) const {
  HeadsToRows merge;
  merge.batch = batch;
  merge.seq_len = context_;
  merge.heads = heads_;
  merge.head_size = head_size_;
  return merge;
}

}  // namespace ddp
