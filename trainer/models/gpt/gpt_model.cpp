// gpt_model.cpp: the GPT's forward and backward (gpt_model.h).
#include "trainer/models/gpt/gpt_model.h"

#include <cmath>

#include "kernels/error.h"

namespace ddp {
// kLayerNormEps (transformer_math.h): nn.LayerNorm's default 1e-5, nanoGPT's.

GptModel::GptModel(Backend& backend, const GptConfig& config, int max_batch)
    : backend_(backend), config_(config), registry_(gpt_parameters(config)), max_batch_(max_batch) {
  DDP_REQUIRE(max_batch > 0, "GptModel: batch size must be positive");
  const int c = config.n_embd;
  const size_t r = static_cast<size_t>(max_batch) * config.block_size;
  const size_t rc = r * c;
  const size_t att = static_cast<size_t>(max_batch) * config.n_head * config.block_size * config.block_size;
  wte_ = registry_.find("transformer.wte.weight");
  wpe_ = registry_.find("transformer.wpe.weight");
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = gpt_block_prefix(l);
    blocks_.emplace_back(c);
    Block& b = blocks_.back();
    bind_layernorm(b.ln_1, p + "ln_1");
    bind_layernorm(b.ln_2, p + "ln_2");
    b.c_attn.bind(registry_, p + "attn.c_attn");
    b.attn_proj.bind(registry_, p + "attn.c_proj");
    b.c_fc.bind(registry_, p + "mlp.c_fc");
    b.mlp_proj.bind(registry_, p + "mlp.c_proj");
    b.input = Buffer<half16>(backend, rc);
    b.qkv = Buffer<half16>(backend, 3 * rc);
    b.q = Buffer<half16>(backend, rc), b.k = Buffer<half16>(backend, rc), b.v = Buffer<half16>(backend, rc);
    b.probs = Buffer<half16>(backend, att);
    b.attn_rows = Buffer<half16>(backend, rc);
    b.mid = Buffer<half16>(backend, rc);
    b.fc_pre = Buffer<half16>(backend, 4 * rc), b.fc_out = Buffer<half16>(backend, 4 * rc);
  }
  bind_layernorm(ln_f_, "transformer.ln_f");
  final_out_ = Buffer<half16>(backend, rc);
  logits_ = Buffer<half16>(backend, r * config.vocab_size);
  output_grad_ = Buffer<half16>(backend, r * config.vocab_size);
  d_res_ = Buffer<half16>(backend, rc), d_ln_ = Buffer<half16>(backend, rc), d_fc_ = Buffer<half16>(backend, 4 * rc);
  d_qkv_ = Buffer<half16>(backend, 3 * rc), d_rows_ = Buffer<half16>(backend, rc);
  d_heads_ = Buffer<half16>(backend, rc);
  d_q_ = Buffer<half16>(backend, rc), d_k_ = Buffer<half16>(backend, rc), d_v_ = Buffer<half16>(backend, rc);
  d_probs_ = Buffer<half16>(backend, att);
  proj_scratch_ = Buffer<half16>(backend, rc);
}

void GptModel::bind_layernorm(LayerNormState& ln, const std::string& prefix) {
  ln.weight_tensor = registry_.find(prefix + ".weight");
  DDP_REQUIRE(ln.weight_tensor + 1 < registry_.size() && registry_[ln.weight_tensor + 1].name == prefix + ".bias",
              "GptModel: a LayerNorm's weight and bias are consecutive");
  const size_t r = static_cast<size_t>(max_batch_) * config_.block_size;
  ln.out = Buffer<half16>(backend_, r * config_.n_embd);
  ln.mean = Buffer<float>(backend_, r);
  ln.rstd = Buffer<float>(backend_, r);
}

std::vector<size_t> GptModel::layer_tensors(int layer) const {
  DDP_REQUIRE(layer >= 0 && layer < layer_count(), "GptModel::layer_tensors: no such layer");
  if (layer == 0) return {wpe_, wte_};
  if (layer == config_.n_layer + 1) return {ln_f_.weight_tensor, ln_f_.weight_tensor + 1, wte_};
  // A block's tensors are consecutive in the registry (gpt_config.h), from
  // mlp.c_proj's weight to ln_1's bias.
  const Block& b = blocks_[static_cast<size_t>(layer - 1)];
  std::vector<size_t> tensors;
  for (size_t t = b.mlp_proj.weight_tensor(); t < b.ln_1.weight_tensor + 2; ++t) tensors.push_back(t);
  return tensors;
}

void GptModel::layernorm_forward(LayerNormState& ln, const half16* x, const WeightTable& weights_fp16) {
  backend_.layernorm_forward_fp16(x, weights_fp16.at(ln.weight_tensor), weights_fp16.at(ln.weight_tensor + 1),
                                  static_cast<int>(rows()),
                                  config_.n_embd, kLayerNormEps, ln.out.data(), ln.mean.data(), ln.rstd.data());
}

void GptModel::layernorm_backward(const LayerNormState& ln, const half16* dy, const half16* x,
                                  const WeightTable& weights_fp16, const GradTable& grads_fp16, bool accumulate,
                                  half16* d_residual, bool add_to_residual) {
  backend_.layernorm_backward_fp16(dy, x, weights_fp16.at(ln.weight_tensor), ln.mean.data(), ln.rstd.data(),
                                   static_cast<int>(rows()), config_.n_embd, d_residual, add_to_residual,
                                   grads_fp16.at(ln.weight_tensor), grads_fp16.at(ln.weight_tensor + 1), accumulate);
}

void GptModel::residual_projection(const LinearLayer& layer, const half16* in, const half16* x,
                                   const WeightTable& weights_fp16, half16* y) {
  // Two roundings (the projection, then the add), as PyTorch's x + proj(y)
  // under autocast; folding the add into the GEMM (beta 1) would round once.
  layer.forward(backend_, in, static_cast<int>(rows()), weights_fp16, proj_scratch_.data(), Activation::None, nullptr);
  backend_.add_fp16(x, proj_scratch_.data(), y, rows() * config_.n_embd);
}

void GptModel::attention_forward(Block& b) {
  const int B = batch_rows_, T = config_.block_size, nh = config_.n_head, hs = config_.head_size();
  const int c = config_.n_embd;
  backend_.rows_to_heads_fp16(b.qkv.data(), 3 * c, B, T, nh, hs, b.q.data());
  backend_.rows_to_heads_fp16(b.qkv.data() + c, 3 * c, B, T, nh, hs, b.k.data());
  backend_.rows_to_heads_fp16(b.qkv.data() + 2 * c, 3 * c, B, T, nh, hs, b.v.data());
  const int z = B * nh;
  const int64_t th = static_cast<int64_t>(T) * hs, tt = static_cast<int64_t>(T) * T;
  GemmFp16 s;  // scores[z] [T, T] = q[z] k[z]^T (the 1/sqrt(hs) is the softmax's)
  s.trans_b = Transpose::Yes;
  s.m = T, s.n = T, s.k = hs;
  s.a = b.q.data(), s.lda = hs, s.b = b.k.data(), s.ldb = hs, s.c = b.probs.data(), s.ldc = T;
  backend_.gemm_batched_fp16(s, z, th, th, tt);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  backend_.causal_softmax_forward_fp16(b.probs.data(), z, T, scale, b.probs.data());
  GemmFp16 y;  // y[z] [T, hs] = P[z] v[z]
  y.m = T, y.n = hs, y.k = T;
  y.a = b.probs.data(), y.lda = T, y.b = b.v.data(), y.ldb = hs, y.c = d_heads_.data(), y.ldc = hs;
  backend_.gemm_batched_fp16(y, z, tt, th, th);
  backend_.heads_to_rows_fp16(d_heads_.data(), B, T, nh, hs, b.attn_rows.data(), c);
}

ModelOutput GptModel::forward(const DeviceBatch& batch, const WeightTable& weights_fp16) {
  DDP_REQUIRE(batch.rows > 0 && batch.rows <= max_batch_, "GptModel::forward: batch larger than allocated");
  DDP_REQUIRE(weights_fp16.size() == registry_.size(), "GptModel::forward: the weight table is not the registry's");
  DDP_REQUIRE(batch.token_ids != nullptr, "GptModel::forward: the GPT reads token ids");
  tokens_ = batch.token_ids;
  batch_rows_ = batch.rows;
  const int c = config_.n_embd, rows_i = static_cast<int>(rows());
  before_forward(0);
  half16* x = config_.n_layer > 0 ? blocks_[0].input.data() : final_out_.data();
  backend_.embedding_forward_fp16(tokens_, weights_fp16.at(wte_), weights_fp16.at(wpe_), batch_rows_,
                                  config_.block_size, c, config_.vocab_size, x);
  for (int l = 0; l < config_.n_layer; ++l) {
    before_forward(l + 1);
    Block& b = blocks_[l];
    layernorm_forward(b.ln_1, b.input.data(), weights_fp16);
    b.c_attn.forward(backend_, b.ln_1.out.data(), rows_i, weights_fp16, b.qkv.data(), Activation::None, nullptr);
    attention_forward(b);
    residual_projection(b.attn_proj, b.attn_rows.data(), b.input.data(), weights_fp16, b.mid.data());
    layernorm_forward(b.ln_2, b.mid.data(), weights_fp16);
    b.c_fc.forward(backend_, b.ln_2.out.data(), rows_i, weights_fp16, b.fc_out.data(), Activation::GeluTanh,
                   b.fc_pre.data());
    half16* next = l + 1 < config_.n_layer ? blocks_[l + 1].input.data() : final_out_.data();
    residual_projection(b.mlp_proj, b.fc_out.data(), b.mid.data(), weights_fp16, next);
  }
  before_forward(config_.n_layer + 1);
  layernorm_forward(ln_f_, final_out_.data(), weights_fp16);
  GemmFp16 head;  // logits [R, V] = LN_f(x) [R, C] wte[V, C]^T
  head.trans_b = Transpose::Yes;
  head.m = rows_i, head.n = config_.vocab_size, head.k = c;
  head.a = ln_f_.out.data(), head.lda = c, head.b = weights_fp16.at(wte_), head.ldb = c;
  head.c = logits_.data(), head.ldc = config_.vocab_size;
  backend_.gemm_fp16(head);
  ModelOutput out{logits_.data(), rows_i, config_.vocab_size};
  out.classes = config_.real_vocab;
  return out;
}

void GptModel::attention_backward(const Block& b, const half16* d_attn_rows, half16* d_qkv) {
  const int B = batch_rows_, T = config_.block_size, nh = config_.n_head, hs = config_.head_size();
  const int c = config_.n_embd, z = B * nh;
  const int64_t th = static_cast<int64_t>(T) * hs, tt = static_cast<int64_t>(T) * T;
  backend_.rows_to_heads_fp16(d_attn_rows, c, B, T, nh, hs, d_heads_.data());  // dy [z, T, hs]
  GemmFp16 dp;  // dP[z] [T, T] = dy[z] v[z]^T
  dp.trans_b = Transpose::Yes;
  dp.m = T, dp.n = T, dp.k = hs;
  dp.a = d_heads_.data(), dp.lda = hs, dp.b = b.v.data(), dp.ldb = hs, dp.c = d_probs_.data(), dp.ldc = T;
  backend_.gemm_batched_fp16(dp, z, th, th, tt);
  GemmFp16 dv;  // dv[z] [T, hs] = P[z]^T dy[z]
  dv.trans_a = Transpose::Yes;
  dv.m = T, dv.n = hs, dv.k = T;
  dv.a = b.probs.data(), dv.lda = T, dv.b = d_heads_.data(), dv.ldb = hs, dv.c = d_v_.data(), dv.ldc = hs;
  backend_.gemm_batched_fp16(dv, z, tt, th, th);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  backend_.causal_softmax_backward_fp16(b.probs.data(), d_probs_.data(), z, T, scale, d_probs_.data());  // dscores
  GemmFp16 dq;  // dq[z] [T, hs] = dS[z] k[z]
  dq.m = T, dq.n = hs, dq.k = T;
  dq.a = d_probs_.data(), dq.lda = T, dq.b = b.k.data(), dq.ldb = hs, dq.c = d_q_.data(), dq.ldc = hs;
  backend_.gemm_batched_fp16(dq, z, tt, th, th);
  GemmFp16 dk;  // dk[z] [T, hs] = dS[z]^T q[z]
  dk.trans_a = Transpose::Yes;
  dk.m = T, dk.n = hs, dk.k = T;
  dk.a = d_probs_.data(), dk.lda = T, dk.b = b.q.data(), dk.ldb = hs, dk.c = d_k_.data(), dk.ldc = hs;
  backend_.gemm_batched_fp16(dk, z, tt, th, th);
  backend_.heads_to_rows_fp16(d_q_.data(), B, T, nh, hs, d_qkv, 3 * c);
  backend_.heads_to_rows_fp16(d_k_.data(), B, T, nh, hs, d_qkv + c, 3 * c);
  backend_.heads_to_rows_fp16(d_v_.data(), B, T, nh, hs, d_qkv + 2 * c, 3 * c);
}

void GptModel::backward(const WeightTable& weights_fp16, const GradTable& grads_fp16, bool accumulate,
                        const GradientsReady& ready) {
  DDP_REQUIRE(tokens_ != nullptr, "GptModel::backward before forward");
  DDP_REQUIRE(weights_fp16.size() == registry_.size() && grads_fp16.size() == registry_.size(),
              "GptModel::backward: a table is not the registry's");
  const int c = config_.n_embd, rows_i = static_cast<int>(rows());
  auto report = [&](size_t first, size_t end) {
    if (ready) ready(first, end);
  };
  before_backward(config_.n_layer + 1);
  GemmFp16 dw;  // d_wte [V, C] = dlogits[R, V]^T LN_f(x)[R, C]: the head's part (the embedding adds its own last)
  dw.trans_a = Transpose::Yes;
  dw.m = config_.vocab_size, dw.n = c, dw.k = rows_i;
  dw.a = output_grad_.data(), dw.lda = config_.vocab_size, dw.b = ln_f_.out.data(), dw.ldb = c;
  dw.beta = accumulate ? 1.0f : 0.0f;
  dw.c = grads_fp16.at(wte_), dw.ldc = c;
  backend_.gemm_fp16(dw);
  GemmFp16 dx;  // d LN_f(x) [R, C] = dlogits [R, V] wte [V, C]
  dx.m = rows_i, dx.n = c, dx.k = config_.vocab_size;
  dx.a = output_grad_.data(), dx.lda = config_.vocab_size, dx.b = weights_fp16.at(wte_), dx.ldb = c;
  dx.c = d_ln_.data(), dx.ldc = c;
  backend_.gemm_fp16(dx);
  // ln_f's input gradient starts the residual stream's: written, not added (no zeroing pass).
  layernorm_backward(ln_f_, d_ln_.data(), final_out_.data(), weights_fp16, grads_fp16, accumulate, d_res_.data(),
                     /*add_to_residual=*/false);
  report(ln_f_.weight_tensor, ln_f_.weight_tensor + 2);

  for (int l = config_.n_layer - 1; l >= 0; --l) {
    before_backward(l + 1);
    const Block& b = blocks_[l];
    // d_res_ holds dx_{l+1}: the MLP's output gradient, and m_l's through the residual.
    b.mlp_proj.backward_weights(backend_, d_res_.data(), b.fc_out.data(), rows_i, grads_fp16, accumulate);
    b.mlp_proj.backward_input(backend_, d_res_.data(), rows_i, weights_fp16, d_fc_.data(), Activation::GeluTanh,
                              b.fc_pre.data());
    b.c_fc.backward_weights(backend_, d_fc_.data(), b.ln_2.out.data(), rows_i, grads_fp16, accumulate);
    b.c_fc.backward_input(backend_, d_fc_.data(), rows_i, weights_fp16, d_ln_.data(), Activation::None, nullptr);
    layernorm_backward(b.ln_2, d_ln_.data(), b.mid.data(), weights_fp16, grads_fp16, accumulate, d_res_.data());
    report(b.mlp_proj.weight_tensor(), b.ln_2.weight_tensor + 2);  // mlp.c_proj, mlp.c_fc, ln_2
    // d_res_ now holds dm_l: the attention's output gradient, and x_l's through the residual.
    b.attn_proj.backward_weights(backend_, d_res_.data(), b.attn_rows.data(), rows_i, grads_fp16, accumulate);
    b.attn_proj.backward_input(backend_, d_res_.data(), rows_i, weights_fp16, d_rows_.data(), Activation::None,
                               nullptr);
    attention_backward(b, d_rows_.data(), d_qkv_.data());
    b.c_attn.backward_weights(backend_, d_qkv_.data(), b.ln_1.out.data(), rows_i, grads_fp16, accumulate);
    b.c_attn.backward_input(backend_, d_qkv_.data(), rows_i, weights_fp16, d_ln_.data(), Activation::None, nullptr);
    layernorm_backward(b.ln_1, d_ln_.data(), b.input.data(), weights_fp16, grads_fp16, accumulate, d_res_.data());
    report(b.attn_proj.weight_tensor(), b.ln_1.weight_tensor + 2);  // attn.c_proj, attn.c_attn, ln_1
  }

  before_backward(0);
  // wpe is written or added to as asked; wte always adds (the head's part is there).
  if (!accumulate) backend_.fill_zero(grads_fp16.at(wpe_), registry_[wpe_].count * sizeof(half16));
  backend_.embedding_backward_fp16(tokens_, d_res_.data(), batch_rows_, config_.block_size, c, config_.vocab_size,
                                   grads_fp16.at(wte_), grads_fp16.at(wpe_), /*accumulate=*/true);
  report(wpe_, wte_ + 1);
}

}  // namespace ddp
