// transformer_block.h: nanoGPT's Block, pre-LayerNorm with residuals:
//   m = x + attn(ln_1(x))
//   out = m + mlp(ln_2(m))
// Each residual add is its own rounding after the branch's (as PyTorch's
// x + f(x) under autocast). Backward: each LayerNorm's input gradient is
// added to the residual stream's gradient in its own pass, so the adds
// cost no extra pass; the MLP half's gradients are final first, then the
// attention half's.
//
// What a block keeps for backward, by --recompute level (recompute.h):
//   none   x, m, ln_1's and ln_2's outputs and statistics, the attention's
//          q, k, v, P and merged rows, the MLP's fc_pre and h.
//   light  x, m and the attention's; the LayerNorms' and the MLP's are in
//          BlockScratch. Backward runs ln_2 and c_fc again from m before the
//          MLP's backward, and ln_1 again from x before the attention's.
//   block  x; the rest is in BlockScratch. Backward first runs ln_1, the
//          attention and the residual add again from x (m into the scratch),
//          then as light (ln_1 so runs twice: its one shared slot holds
//          ln_2's in between; a LayerNorm is cheap against a second slot
//          of [R, C] kept for the whole step).
// Every value run again is the same kernel on the same bits: the same
// result. Bytes per level: models/gpt/gpt_activation_bytes.h.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/causal_self_attention.h"
#include "trainer/models/layers/layer_norm.h"
#include "trainer/models/layers/mlp_block.h"
#include "trainer/models/layers/recompute.h"
#include "trainer/models/layers/tensor_range.h"

namespace ddp {

// Buffers every block uses in turn (one block runs at a time), owned by the
// model; those a level shares (null or empty where it does not).
struct BlockScratch {
  BlockScratch(Backend& backend, size_t max_rows, int channels, const AttentionSizes& attention_sizes, Recompute level);
  Buffer<lowp16> branch;    // [R, C]: a branch's output (attention's, the MLP's) before its residual add
  Buffer<lowp16> d_ln;      // [R, C]: a LayerNorm's output gradient
  Buffer<lowp16> d_hidden;  // [R, 4C]: the MLP's hidden gradient
  AttentionScratch attention;
  std::unique_ptr<LayerNormActivations> layer_norm;      // light, block: ln_1's and ln_2's in turn
  std::unique_ptr<MlpActivations> mlp;                   // light, block
  std::unique_ptr<AttentionActivations> attention_kept;  // block
  Buffer<lowp16> mid;                                    // block: m [R, C]
};

class TransformerBlock {
 public:
  // scratch: the model's, whose shared buffers (of `level`) the layers write.
  TransformerBlock(Backend& backend, int channels, int heads, int context, int max_batch, Recompute level,
                   AttentionPath attention, BlockScratch& scratch);

  // `<prefix>ln_1`, `<prefix>attn.`, `<prefix>ln_2`, `<prefix>mlp.`: the
  // MLP half (mlp, ln_2) and the attention half (attn, ln_1) each adjacent.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return joined(mlp_half_, attention_half_); }

  // x [R, C]: where the layer before writes this block's input.
  lowp16* input() { return input_.data(); }
  // out [R, C] from input(), for `batch` windows.
  void forward(int batch, const WeightTable& weights_lowp, BlockScratch& scratch, lowp16* out);
  // d_residual [R, C]: the output's gradient in, the input's out. The
  // tensors' gradients written or added (accumulate); `ready` gets each
  // half's range as its gradients become final. Runs what its level
  // recomputes first (the same weights as the forward's).
  void backward(int batch, const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                BlockScratch& scratch, lowp16* d_residual, const std::function<void(TensorRange)>& ready);

  // The bytes of the buffers the block owns, by kind (0 where shared).
  size_t residual_bytes() const { return input_.size_bytes() + mid_.size_bytes(); }
  size_t layer_norm_bytes() const { return ln_1_.owned_bytes() + ln_2_.owned_bytes(); }
  size_t attention_bytes() const { return attn_.owned_bytes(); }
  size_t mlp_bytes() const { return mlp_.owned_bytes(); }

 private:
  // m = x + attn(ln_1(x)) into mid().
  void attention_half_forward(int batch, const WeightTable& weights_lowp, BlockScratch& scratch);
  lowp16* mid(BlockScratch& scratch) { return level_ == Recompute::Block ? scratch.mid.data() : mid_.data(); }

  Backend& backend_;
  int channels_;
  int context_;
  Recompute level_;
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  MlpBlock mlp_;
  TensorRange mlp_half_;
  TensorRange attention_half_;
  Buffer<lowp16> input_;  // x [R, C]
  Buffer<lowp16> mid_;    // m [R, C] (none, light; block: scratch.mid)
};

}  // namespace ddp
