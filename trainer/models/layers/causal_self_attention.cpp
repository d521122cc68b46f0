// causal_self_attention.cpp
#include "trainer/models/layers/causal_self_attention.h"

#include <cmath>

#include "kernels/error.h"
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
  backend_.rows_to_heads_lowp(scratch.qkv.data(), 3 * c, batch, T, nh, hs, q_.data());
  backend_.rows_to_heads_lowp(scratch.qkv.data() + c, 3 * c, batch, T, nh, hs, k_.data());
  backend_.rows_to_heads_lowp(scratch.qkv.data() + 2 * c, 3 * c, batch, T, nh, hs, v_.data());
  const int z = batch * nh;
  const int64_t th = static_cast<int64_t>(T) * hs;
  const int64_t tt = static_cast<int64_t>(T) * T;
  // scores[z] [T, T] = q[z] k[z]^T (the 1/sqrt(hs) is the softmax's)
  backend_.gemm_batched_lowp(gemm_nt(T, T, hs, q_.data(), hs, k_.data(), hs, probs_.data(), T), z, th, th, tt);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  backend_.causal_softmax_forward_lowp(probs_.data(), z, T, scale, probs_.data());
  // y[z] [T, hs] = P[z] v[z]
  backend_.gemm_batched_lowp(gemm_nn(T, hs, T, probs_.data(), T, v_.data(), hs, scratch.heads.data(), hs), z, tt, th,
                             th);
  backend_.heads_to_rows_lowp(scratch.heads.data(), batch, T, nh, hs, attn_rows_.data(), c);
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
  backend_.rows_to_heads_lowp(d_rows, c, batch, T, nh, hs, dy);  // dy [z, T, hs]
  // dP[z] [T, T] = dy[z] v[z]^T
  backend_.gemm_batched_lowp(gemm_nt(T, T, hs, dy, hs, v_.data(), hs, d_scores, T), z, th, th, tt);
  // dv[z] [T, hs] = P[z]^T dy[z]
  backend_.gemm_batched_lowp(gemm_tn(T, hs, T, probs_.data(), T, dy, hs, scratch.d_v.data(), hs), z, tt, th, th);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  backend_.causal_softmax_backward_lowp(probs_.data(), d_scores, z, T, scale, d_scores);  // dS, in place
  // dq[z] [T, hs] = dS[z] k[z]
  backend_.gemm_batched_lowp(gemm_nn(T, hs, T, d_scores, T, k_.data(), hs, scratch.d_q.data(), hs), z, tt, th, th);
  // dk[z] [T, hs] = dS[z]^T q[z]
  backend_.gemm_batched_lowp(gemm_tn(T, hs, T, d_scores, T, q_.data(), hs, scratch.d_k.data(), hs), z, tt, th, th);
  backend_.heads_to_rows_lowp(scratch.d_q.data(), batch, T, nh, hs, scratch.d_qkv.data(), 3 * c);
  backend_.heads_to_rows_lowp(scratch.d_k.data(), batch, T, nh, hs, scratch.d_qkv.data() + c, 3 * c);
  backend_.heads_to_rows_lowp(scratch.d_v.data(), batch, T, nh, hs, scratch.d_qkv.data() + 2 * c, 3 * c);
}

// The same heads, split and merged as above, through the fused op.
void CausalSelfAttention::heads_forward_fused(int batch, AttentionScratch& scratch) {
  const int T = context_, nh = heads_, hs = head_size_, c = channels_;
  backend_.rows_to_heads_lowp(scratch.qkv.data(), 3 * c, batch, T, nh, hs, q_.data());
  backend_.rows_to_heads_lowp(scratch.qkv.data() + c, 3 * c, batch, T, nh, hs, k_.data());
  backend_.rows_to_heads_lowp(scratch.qkv.data() + 2 * c, 3 * c, batch, T, nh, hs, v_.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  backend_.attention_forward_fused_lowp(q_.data(), k_.data(), v_.data(), batch * nh, T, hs, scale, scratch.heads.data(),
                                        lse_.data());
  backend_.heads_to_rows_lowp(scratch.heads.data(), batch, T, nh, hs, attn_rows_.data(), c);
}

void CausalSelfAttention::heads_backward_fused(const lowp16* d_rows, int batch, AttentionScratch& scratch) const {
  const int T = context_, nh = heads_, hs = head_size_, c = channels_;
  lowp16* dy = scratch.heads.data();
  backend_.rows_to_heads_lowp(d_rows, c, batch, T, nh, hs, dy);
  // The forward's output in heads layout: the merged rows split again (a
  // copy, so the bits the forward wrote).
  backend_.rows_to_heads_lowp(attn_rows_.data(), c, batch, T, nh, hs, scratch.out_heads.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  backend_.attention_backward_fused_lowp(q_.data(), k_.data(), v_.data(), scratch.out_heads.data(), lse_.data(), dy,
                                         batch * nh, T, hs, scale, scratch.d_q.data(), scratch.d_k.data(),
                                         scratch.d_v.data());
  backend_.heads_to_rows_lowp(scratch.d_q.data(), batch, T, nh, hs, scratch.d_qkv.data(), 3 * c);
  backend_.heads_to_rows_lowp(scratch.d_k.data(), batch, T, nh, hs, scratch.d_qkv.data() + c, 3 * c);
  backend_.heads_to_rows_lowp(scratch.d_v.data(), batch, T, nh, hs, scratch.d_qkv.data() + 2 * c, 3 * c);
}

}  // namespace ddp
