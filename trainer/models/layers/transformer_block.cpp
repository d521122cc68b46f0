// transformer_block.cpp
#include "trainer/models/layers/transformer_block.h"

namespace ddp {

BlockScratch::BlockScratch(Backend& backend, size_t max_rows, int channels, size_t max_scores)
    : branch(backend, max_rows * channels),
      d_ln(backend, max_rows * channels),
      d_hidden(backend, 4 * max_rows * channels),
      attention(backend, max_rows, channels, max_scores) {}

TransformerBlock::TransformerBlock(Backend& backend, int channels, int heads, int context, int max_batch)
    : backend_(backend),
      channels_(channels),
      context_(context),
      ln_1_(backend, channels, static_cast<size_t>(max_batch) * context),
      attn_(backend, channels, heads, context, max_batch),
      ln_2_(backend, channels, static_cast<size_t>(max_batch) * context),
      mlp_(backend, channels, static_cast<size_t>(max_batch) * context),
      input_(backend, static_cast<size_t>(max_batch) * context * channels),
      mid_(backend, static_cast<size_t>(max_batch) * context * channels) {}

void TransformerBlock::bind(const ParameterRegistry& registry, const std::string& prefix) {
  ln_1_.bind(registry, prefix + "ln_1");
  attn_.bind(registry, prefix + "attn.");
  ln_2_.bind(registry, prefix + "ln_2");
  mlp_.bind(registry, prefix + "mlp.");
  mlp_half_ = joined(mlp_.tensors(), ln_2_.tensors());
  attention_half_ = joined(attn_.tensors(), ln_1_.tensors());
}

void TransformerBlock::forward(int batch, const WeightTable& weights_fp16, BlockScratch& scratch, half16* out) {
  const int rows = batch * context_;
  const size_t count = static_cast<size_t>(rows) * channels_;
  ln_1_.forward(input_.data(), rows, weights_fp16);
  attn_.forward(ln_1_.out(), batch, weights_fp16, scratch.attention, scratch.branch.data());
  backend_.add_fp16(input_.data(), scratch.branch.data(), mid_.data(), count);
  ln_2_.forward(mid_.data(), rows, weights_fp16);
  mlp_.forward(ln_2_.out(), rows, weights_fp16, scratch.branch.data());
  backend_.add_fp16(mid_.data(), scratch.branch.data(), out, count);
}

void TransformerBlock::backward(int batch, const WeightTable& weights_fp16, const GradTable& grads_fp16,
                                bool accumulate, BlockScratch& scratch, half16* d_residual,
                                const std::function<void(TensorRange)>& ready) const {
  const int rows = batch * context_;
  // d_residual holds dout: the MLP's output gradient, and m's through the residual.
  mlp_.backward(d_residual, rows, weights_fp16, grads_fp16, accumulate, scratch.d_hidden.data(), scratch.d_ln.data());
  ln_2_.backward(scratch.d_ln.data(), mid_.data(), rows, weights_fp16, grads_fp16, accumulate, d_residual,
                 /*add_to_residual=*/true);
  ready(mlp_half_);
  // d_residual now holds dm: the attention's output gradient, and x's through the residual.
  attn_.backward(d_residual, batch, weights_fp16, grads_fp16, accumulate, scratch.attention, scratch.d_ln.data());
  ln_1_.backward(scratch.d_ln.data(), input_.data(), rows, weights_fp16, grads_fp16, accumulate, d_residual,
                 /*add_to_residual=*/true);
  ready(attention_half_);
}

}  // namespace ddp
