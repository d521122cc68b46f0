// transformer_block.cpp
#include "trainer/models/layers/transformer_block.h"

#include "trainer/models/layers/residual_add.h"

namespace ddp {

BlockScratch::BlockScratch(Backend& backend, size_t max_rows, int channels, const AttentionSizes& attention_sizes,
                           Recompute level)
    : branch(backend, max_rows * channels),
      d_ln(backend, max_rows * channels),
      d_hidden(backend, 4 * max_rows * channels),
      attention(backend, attention_sizes) {
  if (level == Recompute::None) return;
  layer_norm = std::make_unique<LayerNormActivations>(backend, channels, max_rows);
  mlp = std::make_unique<MlpActivations>(backend, channels, max_rows);
  if (level != Recompute::Block) return;
  attention_kept = std::make_unique<AttentionActivations>(backend, attention_sizes);
  mid = Buffer<lowp16>(backend, max_rows * channels);
}

TransformerBlock::TransformerBlock(Backend& backend, int channels, int heads, int context, int max_batch,
                                   Recompute level, AttentionPath attention, BlockScratch& scratch)
    : backend_(backend),
      channels_(channels),
      context_(context),
      level_(level),
      ln_1_(backend, channels, static_cast<size_t>(max_batch) * context, scratch.layer_norm.get()),
      attn_(backend, channels, heads, context, max_batch, attention, scratch.attention_kept.get()),
      ln_2_(backend, channels, static_cast<size_t>(max_batch) * context, scratch.layer_norm.get()),
      mlp_(backend, channels, static_cast<size_t>(max_batch) * context, scratch.mlp.get()),
      input_(backend, static_cast<size_t>(max_batch) * context * channels) {
  if (level != Recompute::Block) mid_ = Buffer<lowp16>(backend, static_cast<size_t>(max_batch) * context * channels);
}

void TransformerBlock::bind(const ParameterRegistry& registry, const std::string& prefix) {
  ln_1_.bind(registry, prefix + "ln_1");
  attn_.bind(registry, prefix + "attn.");
  ln_2_.bind(registry, prefix + "ln_2");
  mlp_.bind(registry, prefix + "mlp.");
  mlp_half_ = joined(mlp_.tensors(), ln_2_.tensors());
  attention_half_ = joined(attn_.tensors(), ln_1_.tensors());
}

void TransformerBlock::attention_half_forward(int batch, const WeightTable& weights_lowp, BlockScratch& scratch) {
  const int rows = batch * context_;
  ln_1_.forward(input_.data(), rows, weights_lowp);
  attn_.forward(ln_1_.out(), batch, weights_lowp, scratch.attention, scratch.branch.data());
  residual_add(backend_, input_.data(), scratch.branch.data(), mid(scratch), static_cast<size_t>(rows) * channels_);
}

void TransformerBlock::forward(int batch, const WeightTable& weights_lowp, BlockScratch& scratch, lowp16* out) {
  const int rows = batch * context_;
  attention_half_forward(batch, weights_lowp, scratch);
  ln_2_.forward(mid(scratch), rows, weights_lowp);
  mlp_.forward(ln_2_.out(), rows, weights_lowp, scratch.branch.data());
  residual_add(backend_, mid(scratch), scratch.branch.data(), out, static_cast<size_t>(rows) * channels_);
}

void TransformerBlock::backward(int batch, const WeightTable& weights_lowp, const GradTable& grads_lowp,
                                bool accumulate, BlockScratch& scratch, lowp16* d_residual,
                                const std::function<void(TensorRange)>& ready) {
  const int rows = batch * context_;
  if (level_ == Recompute::Block) attention_half_forward(batch, weights_lowp, scratch);
  if (level_ != Recompute::None) {  // ln_2's output and statistics, fc_pre and h, as forward left them
    ln_2_.forward(mid(scratch), rows, weights_lowp);
    mlp_.recompute_hidden(ln_2_.out(), rows, weights_lowp);
  }
  // d_residual holds dout: the MLP's output gradient, and m's through the residual.
  mlp_.backward(d_residual, rows, weights_lowp, grads_lowp, accumulate, scratch.d_hidden.data(), scratch.d_ln.data());
  ln_2_.backward(scratch.d_ln.data(), mid(scratch), rows, weights_lowp, grads_lowp, accumulate, d_residual,
                 /*add_to_residual=*/true);
  ready(mlp_half_);
  // ln_1's output (c_attn's weight gradient reads it) and statistics, in
  // the slot ln_2 has just used.
  if (level_ != Recompute::None) ln_1_.forward(input_.data(), rows, weights_lowp);
  // d_residual now holds dm: the attention's output gradient, and x's through the residual.
  attn_.backward(d_residual, batch, weights_lowp, grads_lowp, accumulate, scratch.attention, scratch.d_ln.data());
  ln_1_.backward(scratch.d_ln.data(), input_.data(), rows, weights_lowp, grads_lowp, accumulate, d_residual,
                 /*add_to_residual=*/true);
  ready(attention_half_);
}

}  // namespace ddp
