// gpt_model.h: a GPT-2 / nanoGPT language model (gpt_config.h names its
// tensors) in FP16 on a Backend, per the numerics contract (DESIGN.md,
// "Transformer"): FP16 weights and activations, FP32 sums in every GEMM,
// LayerNorm statistics and the softmax in FP32 from FP16 inputs, one
// rounding per output.
//
// Forward, rows R = B x T, C = n_embd, heads nh of size hs:
//   x_0 = wte[tok] + wpe[pos]
//   block l:  a = LN_1(x_l);  qkv = a W_attn^T + b;  q, k, v split into heads
//             P = causal_softmax(q k^T / sqrt(hs));  y = merge(P v)
//             m_l = x_l + (y W_proj^T + b)
//             h = gelu_tanh(LN_2(m_l) W_fc^T + b)     (bias and GELU in the GEMM's epilogue)
//             x_{l+1} = m_l + (h W_mp^T + b)
//   logits = LN_f(x_L) wte^T   [R, vocab_size]; classes >= real_vocab never win (loss_head.h)
// With --classifier-chunk the head (models/layers/tied_classifier.h) runs
// the last line and the cross-entropy in row chunks, writing each chunk's
// gradient in place of its logits: on the CPU the loss and gradients are
// the same bits (on CUDA the GEMMs may pick other algorithms by shape).
// Backward runs the same lines in reverse; each LayerNorm's input gradient
// is added to the residual stream's in its own pass (accumulate), so the
// residual adds cost no extra pass in backward. Gradients become final
// in registry order: ln_f, each block from the last (its MLP, ln_2, its
// attention, ln_1), then wpe and wte (the tied head's GEMM writes wte's
// gradient first, the embedding's backward adds to it last).
//
// Composed as nanoGPT's model.py: the embeddings, n_layer transformer
// blocks (models/layers/transformer_block.h: LayerNorm, CausalSelfAttention,
// the MLP), ln_f and the tied head; each layer owns what it keeps for
// backward and reports the tensors it finished.
//
// --recompute (config.recompute, models/layers/recompute.h) decides what
// the blocks keep and what their backward runs again (transformer_block.h);
// every level trains the same bits.
//
// Layers (for the hooks): 0 the embeddings, 1..n_layer the blocks,
// n_layer + 1 ln_f and the head.
#pragma once

#include <vector>

#include "kernels/buffer.h"
#include "trainer/models/gpt/gpt_activation_bytes.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/layers/layer_norm.h"
#include "trainer/models/layers/tied_classifier.h"
#include "trainer/models/layers/transformer_block.h"
#include "trainer/models/model.h"

namespace ddp {

class GptModel final : public Model {
 public:
  // max_batch: windows per forward (each of block_size tokens).
  GptModel(Backend& backend, const GptConfig& config, int max_batch);

  const ParameterRegistry& parameters() const override { return registry_; }
  int max_batch() const override { return max_batch_; }
  int layer_count() const override { return config_.n_layer + 2; }
  // Layer 0: wpe, wte; block l (layer l + 1): its twelve tensors; layer
  // n_layer + 1: ln_f's and wte (the tied head).
  std::vector<size_t> layer_tensors(int layer) const override;
  int outputs_per_sample() const override { return config_.block_size; }

  // batch.token_ids [rows, T]. Outputs [rows x T, vocab_size] (classes real_vocab).
  ModelOutput forward(const DeviceBatch& batch, const WeightTable& weights_lowp) override;
  lowp16* output_grad() override { return head_.output_grad(); }
  bool fuses_loss() const override { return head_.chunked(); }
  void forward_rows(const DeviceBatch& batch, const WeightTable& weights_lowp, const OutputRows& each) override;
  void forward_with_loss(const DeviceBatch& batch, const WeightTable& weights_lowp, ScalarArg scale,
                         float* loss_mean) override;
  void backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                const GradientsReady& ready) override;

  // What the blocks and their shared scratch allocated for activations,
  // from the buffers' sizes, by kind (gpt_activation_formula predicts it);
  // the embeddings', ln_f's and the head's buffers aside.
  GptActivationBytes activation_bytes_by_kind() const;
  double activation_bytes() const { return activation_bytes_by_kind().total(); }
  // Every buffer the model allocated, by kind, beside gpt_model_formula.
  ActivationKinds activation_kinds() const override;

 private:
  size_t rows() const { return static_cast<size_t>(batch_rows_) * config_.block_size; }
  // The embeddings, the blocks and ln_f: x_L's LayerNorm in ln_f_.out().
  void forward_body(const DeviceBatch& batch, const WeightTable& weights_lowp);

  Backend& backend_;
  GptConfig config_;
  ParameterRegistry registry_;
  int max_batch_;
  size_t wte_ = 0;  // tensor indices
  size_t wpe_ = 0;
  AttentionPath attention_;  // config_.attention resolved for the backend's device
  std::vector<TransformerBlock> blocks_;
  LayerNorm ln_f_;
  BlockScratch scratch_;             // the blocks' shared buffers
  Buffer<lowp16> final_out_;         // x_L [R, C]: the last block's output
  TiedClassifier head_;              // the logits [R, vocab] and their gradient
  Buffer<lowp16> d_residual_;        // [R, C]: the residual stream's gradient, from the head down to the embeddings
  const int32_t* tokens_ = nullptr;  // of the last forward
  int batch_rows_ = 0;
};

}  // namespace ddp
