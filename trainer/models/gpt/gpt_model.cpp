// gpt_model.cpp: the GPT's forward and backward (gpt_model.h).
#include "trainer/models/gpt/gpt_model.h"

#include "kernels/error.h"
#include "kernels/ops/embedding.h"
#include "trainer/models/layers/gemm_calls.h"

namespace ddp {

GptModel::GptModel(Backend& backend, const GptConfig& config, int max_batch)
    : backend_(backend),
      config_(config),
      registry_(gpt_parameters(config)),
      max_batch_(max_batch),
      attention_(resolve_attention_path(config.attention, backend.kind())),
      ln_f_(backend, config.n_embd, static_cast<size_t>(max_batch) * config.block_size),
      scratch_(backend, static_cast<size_t>(max_batch) * config.block_size, config.n_embd,
               AttentionSizes(config.n_embd, config.n_head, config.block_size, max_batch, attention_),
               config.recompute),
      head_(backend, config.n_embd, config.vocab_size, config.real_vocab,
            static_cast<size_t>(max_batch) * config.block_size, config.classifier_chunk, config.classifier_logits) {
  DDP_REQUIRE(max_batch > 0, "GptModel: batch size must be positive");
  const size_t r = static_cast<size_t>(max_batch) * config.block_size;
  wte_ = registry_.find("transformer.wte.weight");
  wpe_ = registry_.find("transformer.wpe.weight");
  blocks_.reserve(static_cast<size_t>(config.n_layer));  // no move: the layers keep pointers into their buffers
  for (int l = 0; l < config.n_layer; ++l) {
    blocks_.emplace_back(backend, config.n_embd, config.n_head, config.block_size, max_batch, config.recompute,
                         attention_, scratch_);
    blocks_.back().bind(registry_, gpt_block_prefix(l));
  }
  ln_f_.bind(registry_, "transformer.ln_f");
  head_.bind(wte_);
  final_out_ = Buffer<lowp16>(backend, r * config.n_embd);
  d_residual_ = Buffer<lowp16>(backend, r * config.n_embd);
}

std::vector<size_t> GptModel::layer_tensors(int layer) const {
  DDP_REQUIRE(layer >= 0 && layer < layer_count(), "GptModel::layer_tensors: no such layer");
  if (layer == 0) return {wpe_, wte_};
  if (layer == config_.n_layer + 1) return {ln_f_.tensors().first, ln_f_.tensors().first + 1, wte_};
  const TensorRange block = blocks_[static_cast<size_t>(layer - 1)].tensors();
  std::vector<size_t> tensors;
  for (size_t t = block.first; t < block.end; ++t) tensors.push_back(t);
  return tensors;
}

GptActivationBytes GptModel::activation_bytes_by_kind() const {
  GptActivationBytes bytes;
  for (const TransformerBlock& block : blocks_) {
    bytes.attention += static_cast<double>(block.attention_bytes());
    bytes.mlp += static_cast<double>(block.mlp_bytes());
    bytes.layernorm += static_cast<double>(block.layer_norm_bytes());
    bytes.residual += static_cast<double>(block.residual_bytes());
  }
  const BlockScratch& s = scratch_;
  bytes.attention += static_cast<double>(s.attention.size_bytes());
  if (s.attention_kept) bytes.attention += static_cast<double>(s.attention_kept->size_bytes());
  bytes.mlp += static_cast<double>(s.d_hidden.size_bytes());
  if (s.mlp) bytes.mlp += static_cast<double>(s.mlp->size_bytes());
  bytes.layernorm += static_cast<double>(s.d_ln.size_bytes());
  if (s.layer_norm) bytes.layernorm += static_cast<double>(s.layer_norm->size_bytes());
  bytes.residual += static_cast<double>(s.branch.size_bytes() + s.mid.size_bytes());
  return bytes;
}

ActivationKinds GptModel::activation_kinds() const {
  GptModelBytes measured;
  measured.blocks = activation_bytes_by_kind();
  measured.ln_f = static_cast<double>(ln_f_.owned_bytes());
  measured.residual_outside = static_cast<double>(final_out_.size_bytes() + d_residual_.size_bytes());
  measured.classifier = static_cast<double>(head_.buffer_bytes());
  GptConfig resolved = config_;
  resolved.attention = attention_;
  return gpt_activation_kinds(resolved, measured, gpt_model_formula(resolved, max_batch_));
}

void GptModel::forward_body(const DeviceBatch& batch, const WeightTable& weights_lowp) {
  DDP_REQUIRE(batch.rows > 0 && batch.rows <= max_batch_, "GptModel::forward: batch larger than allocated");
  DDP_REQUIRE(weights_lowp.size() == registry_.size(), "GptModel::forward: the weight table is not the registry's");
  DDP_REQUIRE(batch.token_ids != nullptr, "GptModel::forward: the GPT reads token ids");
  tokens_ = batch.token_ids;
  batch_rows_ = batch.rows;
  const int c = config_.n_embd;
  const int rows_i = static_cast<int>(rows());
  before_forward(0);
  lowp16* x = config_.n_layer > 0 ? blocks_[0].input() : final_out_.data();
  EmbeddingForward embed;
  embed.tokens = tokens_;
  embed.wte = weights_lowp.at(wte_);
  embed.wpe = weights_lowp.at(wpe_);
  embed.batch = batch_rows_;
  embed.seq_len = config_.block_size;
  embed.channels = c;
  embed.vocab = config_.vocab_size;
  embed.out = x;
  embedding_forward_lowp(backend_, embed);
  for (int l = 0; l < config_.n_layer; ++l) {
    before_forward(l + 1);
    lowp16* next = l + 1 < config_.n_layer ? blocks_[l + 1].input() : final_out_.data();
    blocks_[l].forward(batch_rows_, weights_lowp, scratch_, next);
  }
  before_forward(config_.n_layer + 1);
  ln_f_.forward(final_out_.data(), rows_i, weights_lowp);
}

ModelOutput GptModel::forward(const DeviceBatch& batch, const WeightTable& weights_lowp) {
  forward_body(batch, weights_lowp);
  return head_.forward(ln_f_.out(), static_cast<int>(rows()), weights_lowp);
}

void GptModel::forward_rows(const DeviceBatch& batch, const WeightTable& weights_lowp, const OutputRows& each) {
  forward_body(batch, weights_lowp);
  head_.forward_rows(ln_f_.out(), static_cast<int>(rows()), weights_lowp, each);
}

void GptModel::forward_with_loss(const DeviceBatch& batch, const WeightTable& weights_lowp, ScalarArg scale,
                                 float* loss_mean) {
  DDP_REQUIRE(batch.labels != nullptr, "GptModel::forward_with_loss: the batch has no labels");
  forward_body(batch, weights_lowp);
  head_.forward_with_loss(ln_f_.out(), static_cast<int>(rows()), weights_lowp, batch.labels, scale, loss_mean);
}

void GptModel::backward(const WeightTable& weights_lowp, const GradTable& grads_lowp, bool accumulate,
                        const GradientsReady& ready) {
  DDP_REQUIRE(tokens_ != nullptr, "GptModel::backward before forward");
  DDP_REQUIRE(weights_lowp.size() == registry_.size() && grads_lowp.size() == registry_.size(),
              "GptModel::backward: a table is not the registry's");
  const int c = config_.n_embd;
  const int rows_i = static_cast<int>(rows());
  auto report = [&](TensorRange range) {
    if (ready) ready(range.first, range.end);
  };
  before_backward(config_.n_layer + 1);
  // d_wte's head part (the embedding adds its own last) and d LN_f(x) [R, C].
  head_.backward(ln_f_.out(), rows_i, weights_lowp, grads_lowp, accumulate, scratch_.d_ln.data());
  // ln_f's input gradient starts the residual stream's: written, not added (no zeroing pass).
  ln_f_.backward(scratch_.d_ln.data(), final_out_.data(), rows_i, weights_lowp, grads_lowp, accumulate,
                 d_residual_.data(), /*add_to_residual=*/false);
  report(ln_f_.tensors());

  for (int l = config_.n_layer - 1; l >= 0; --l) {
    before_backward(l + 1);
    blocks_[l].backward(batch_rows_, weights_lowp, grads_lowp, accumulate, scratch_, d_residual_.data(), report);
  }

  before_backward(0);
  // wpe is written or added to as asked; wte always adds (the head's part is there).
  if (!accumulate) backend_.fill_zero(grads_lowp.at(wpe_), registry_[wpe_].count * sizeof(lowp16));
  EmbeddingBackward embed;
  embed.tokens = tokens_;
  embed.dout = d_residual_.data();
  embed.batch = batch_rows_;
  embed.seq_len = config_.block_size;
  embed.channels = c;
  embed.vocab = config_.vocab_size;
  embed.d_wte = grads_lowp.at(wte_);
  embed.d_wpe = grads_lowp.at(wpe_);
  embed.accumulate = true;
  embedding_backward_lowp(backend_, embed);
  report(TensorRange{wpe_, wte_ + 1});
}

}  // namespace ddp
