// gpt_decoder.cpp: the GPT's incremental forward over a KV cache
// (gpt_decoder.h). The lines are GptModel's (gpt_model.h) on the new rows
// only; the attention reads every cached position.
#include "trainer/models/gpt/gpt_decoder.h"

#include <cmath>

#include "kernels/error.h"
#include "kernels/lowp_convert.h"
#include "kernels/ops/attention_decode.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/head_layout.h"
#include "trainer/models/layers/gemm_calls.h"
#include "trainer/models/layers/residual_add.h"

namespace ddp {

GptDecoder::GptDecoder(Backend& backend, const GptConfig& config, const WeightTable& weights_lowp)
    : backend_(backend),
      config_(config),
      registry_(gpt_parameters(config)),
      weights_lowp_(weights_lowp),
      norm_(backend, config.n_embd, static_cast<size_t>(config.block_size)),
      mlp_(backend, config.n_embd, static_cast<size_t>(config.block_size)) {
  DDP_REQUIRE(
      config.block_size > 0 && config.vocab_size > 0 && config.real_vocab > 0 && config.real_vocab <= config.vocab_size,
      "GptDecoder: the GPT has no context or vocabulary");
  DDP_REQUIRE(config.n_head > 0 && config.n_embd % config.n_head == 0, "GptDecoder: the heads must divide n_embd");
  DDP_REQUIRE(weights_lowp.size() == registry_.size(), "GptDecoder: the weight table is not the GPT's registry");
  const size_t t = static_cast<size_t>(config.block_size);
  const size_t c = static_cast<size_t>(config.n_embd);
  wte_ = registry_.find("transformer.wte.weight");
  wpe_ = registry_.find("transformer.wpe.weight");
  layers_.reserve(static_cast<size_t>(config.n_layer));
  for (int l = 0; l < config.n_layer; ++l) {
    Layer layer{gpt_block_prefix(l), LinearLayer(config.n_embd, 3 * config.n_embd),
                LinearLayer(config.n_embd, config.n_embd), Buffer<lowp16>(backend, t * c),
                Buffer<lowp16>(backend, t * c)};
    layer.c_attn.bind(registry_, layer.prefix + "attn.c_attn");
    layer.c_proj.bind(registry_, layer.prefix + "attn.c_proj");
    layers_.push_back(std::move(layer));
  }
  token_ids_ = Buffer<int32_t>(backend, t);
  x_ = Buffer<lowp16>(backend, t * c);
  mid_ = Buffer<lowp16>(backend, t * c);
  branch_ = Buffer<lowp16>(backend, t * c);
  qkv_ = Buffer<lowp16>(backend, 3 * t * c);
  attn_rows_ = Buffer<lowp16>(backend, t * c);
  logits_lowp_ = Buffer<lowp16>(backend, static_cast<size_t>(config.vocab_size));
  logits_host_lowp_.resize(static_cast<size_t>(config.vocab_size));
  logits_fp32_.resize(static_cast<size_t>(config.real_vocab));
  tokens_.reserve(t);
}

void GptDecoder::reset() { tokens_.clear(); }

const std::vector<float>& GptDecoder::append(const std::vector<int32_t>& tokens) {
  DDP_REQUIRE(!tokens.empty(), "GptDecoder::append: no tokens");
  for (const int32_t token : tokens)
    DDP_REQUIRE(token >= 0 && token < config_.vocab_size, "GptDecoder::append: token " + std::to_string(token) +
                                                              " is outside the vocabulary of " +
                                                              std::to_string(config_.vocab_size));
  const size_t t = static_cast<size_t>(config_.block_size);
  int first = length();
  if (tokens_.size() + tokens.size() > t) {
    // The crop: the last T tokens of the context and the new ones, from
    // position 0 again (see the header).
    std::vector<int32_t> context = tokens_;
    context.insert(context.end(), tokens.begin(), tokens.end());
    tokens_.assign(context.end() - static_cast<std::ptrdiff_t>(t), context.end());
    first = 0;
  } else {
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  }
  forward_new(first);
  return logits_fp32_;
}

void GptDecoder::forward_new(int first) {
  const int c = config_.n_embd;
  const int rows = length() - first;
  const size_t c_count = static_cast<size_t>(c);
  backend_.copy_to_device(token_ids_.data(), tokens_.data() + first, static_cast<size_t>(rows) * sizeof(int32_t));
  // x = wte[tok] + wpe[pos]: the position table from row `first` on, so the
  // embedding's row r reads position first + r.
  EmbeddingForward embed;
  embed.tokens = token_ids_.data();
  embed.wte = weights_lowp_.at(wte_);
  embed.wpe = weights_lowp_.at(wpe_) + static_cast<size_t>(first) * c_count;
  embed.batch = 1;
  embed.seq_len = rows;
  embed.channels = c;
  embed.vocab = config_.vocab_size;
  embed.out = x_.data();
  embedding_forward_lowp(backend_, embed);
  for (Layer& layer : layers_) block_forward(layer, first, rows);
  // logits [1, V] = LN_f(x_last) [1, C] wte [V, C]^T: the last row alone.
  norm_.bind(registry_, "transformer.ln_f");
  norm_.forward(x_.data() + static_cast<size_t>(rows - 1) * c_count, 1, weights_lowp_);
  gemm_lowp(backend_, gemm_nt(1, config_.vocab_size, c, norm_.out(), c, weights_lowp_.at(wte_), c, logits_lowp_.data(),
                              config_.vocab_size));
  backend_.copy_to_host(logits_host_lowp_.data(), logits_lowp_.data(), logits_host_lowp_.size() * sizeof(lowp16));
  lowp_to_float_array(backend_.precision(), logits_host_lowp_.data(), logits_fp32_.data(), logits_fp32_.size());
}

// TransformerBlock::forward's lines (transformer_block.h) for `rows` new
// positions after `past` cached ones; x_ is the block's input and output.
void GptDecoder::block_forward(Layer& layer, int past, int rows) {
  const int c = config_.n_embd;
  const int nh = config_.n_head;
  const int hs = config_.head_size();
  const size_t count = static_cast<size_t>(rows) * c;
  const size_t cache_offset = static_cast<size_t>(past) * c;
  norm_.bind(registry_, layer.prefix + "ln_1");
  norm_.forward(x_.data(), rows, weights_lowp_);
  layer.c_attn.forward(backend_, norm_.out(), rows, weights_lowp_, qkv_.data(), Activation::None, nullptr);
  // The new keys and values into the cache at rows past..: a strided copy
  // of qkv's k and v columns (one "head" as wide as the rows).
  RowsToHeads to_cache;
  to_cache.row_stride = 3 * c;
  to_cache.batch = 1;
  to_cache.seq_len = rows;
  to_cache.heads = 1;
  to_cache.head_size = c;
  to_cache.rows = qkv_.data() + c;
  to_cache.heads_out = layer.k_cache.data() + cache_offset;
  rows_to_heads_lowp(backend_, to_cache);
  to_cache.rows = qkv_.data() + 2 * c;
  to_cache.heads_out = layer.v_cache.data() + cache_offset;
  rows_to_heads_lowp(backend_, to_cache);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  AttentionDecode attention;
  attention.q = qkv_.data();
  attention.q_stride = 3 * c;
  attention.k_cache = layer.k_cache.data();
  attention.v_cache = layer.v_cache.data();
  attention.kv_stride = c;
  attention.heads = nh;
  attention.head_size = hs;
  attention.past_len = past;
  attention.new_len = rows;
  attention.scale = scale;
  attention.out = attn_rows_.data();
  attention.out_stride = c;
  attention_decode_lowp(backend_, attention);
  layer.c_proj.forward(backend_, attn_rows_.data(), rows, weights_lowp_, branch_.data(), Activation::None, nullptr);
  residual_add(backend_, x_.data(), branch_.data(), mid_.data(), count);
  norm_.bind(registry_, layer.prefix + "ln_2");
  norm_.forward(mid_.data(), rows, weights_lowp_);
  mlp_.bind(registry_, layer.prefix + "mlp.");
  mlp_.forward(norm_.out(), rows, weights_lowp_, branch_.data());
  residual_add(backend_, mid_.data(), branch_.data(), x_.data(), count);
}

}  // namespace ddp
