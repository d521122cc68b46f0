// transformer_block.h: nanoGPT's Block, pre-LayerNorm with residuals:
//   m = x + attn(ln_1(x))
//   out = m + mlp(ln_2(m))
// Each residual add is its own rounding after the branch's (as PyTorch's
// x + f(x) under autocast). Backward: each LayerNorm's input gradient is
// added to the residual stream's gradient in its own pass, so the adds
// cost no extra pass; the MLP half's gradients are final first, then the
// attention half's.
#pragma once

#include <functional>
#include <string>

#include "kernels/backend.h"
#include "kernels/buffer.h"
#include "trainer/models/layers/causal_self_attention.h"
#include "trainer/models/layers/layer_norm.h"
#include "trainer/models/layers/mlp_block.h"
#include "trainer/models/layers/tensor_range.h"

namespace ddp {

// Buffers every block uses in turn (one block runs at a time), owned by the model.
struct BlockScratch {
  BlockScratch(Backend& backend, size_t max_rows, int channels, size_t max_scores);
  Buffer<half16> branch;    // [R, C]: a branch's output (attention's, the MLP's) before its residual add
  Buffer<half16> d_ln;      // [R, C]: a LayerNorm's output gradient
  Buffer<half16> d_hidden;  // [R, 4C]: the MLP's hidden gradient
  AttentionScratch attention;
};

class TransformerBlock {
 public:
  TransformerBlock(Backend& backend, int channels, int heads, int context, int max_batch);

  // `<prefix>ln_1`, `<prefix>attn.`, `<prefix>ln_2`, `<prefix>mlp.`: the
  // MLP half (mlp, ln_2) and the attention half (attn, ln_1) each adjacent.
  void bind(const ParameterRegistry& registry, const std::string& prefix);
  TensorRange tensors() const { return joined(mlp_half_, attention_half_); }

  // x [R, C]: where the layer before writes this block's input.
  half16* input() { return input_.data(); }
  // out [R, C] from input(), for `batch` windows.
  void forward(int batch, const WeightTable& weights_fp16, BlockScratch& scratch, half16* out);
  // d_residual [R, C]: the output's gradient in, the input's out. The
  // tensors' gradients written or added (accumulate); `ready` gets each
  // half's range as its gradients become final.
  void backward(int batch, const WeightTable& weights_fp16, const GradTable& grads_fp16, bool accumulate,
                BlockScratch& scratch, half16* d_residual, const std::function<void(TensorRange)>& ready) const;

 private:
  Backend& backend_;
  int channels_;
  int context_;
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  MlpBlock mlp_;
  TensorRange mlp_half_;
  TensorRange attention_half_;
  Buffer<half16> input_;  // x [R, C]
  Buffer<half16> mid_;    // m [R, C]
};

}  // namespace ddp
