// gpt_reference.h: an independent double-precision GPT-2 (nanoGPT's `GPT`)
// forward and hand-written backward, for tests: the FP16 model is checked
// against it, and it is checked against finite differences
// (test_gpt_reference.cpp) and against PyTorch float64 autograd
// (test_gpt_reference_vs_torch.cpp, through launch/torch_gpt.py --dump).
//
// The model: x = wte[tok] + wpe[t]; n_layer pre-LN blocks
//   x = x + c_proj(attn(c_attn(ln_1(x))));  x = x + c_proj(gelu_tanh(c_fc(ln_2(x))))
// then logits = ln_f(x) wte^T over Vp (padded) columns, of which only the
// first V are classes; loss = mean over the B*T positions of the cross-entropy
// over those V. No dropout. Tensors are nanoGPT's state_dict names in
// nn.Linear layout, row-major; lm_head.weight is wte and not a separate entry,
// so wte's gradient is the embedding's plus the head's.
//
// Written for clarity, not speed: meant for models of a few thousand
// parameters (2 layers, C 32, T 16, V ~ 64), where it runs in milliseconds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/gpt_reference_ops.h"
#include "kernels/error.h"

namespace ddp::test {

struct GptReferenceConfig {
  int n_layer = 2;
  int n_head = 2;
  int n_embd = 32;
  int block_size = 16;    // rows of wpe: the longest context
  int vocab_padded = 64;  // Vp: rows of wte and columns of the logits
  int vocab = 64;         // V <= Vp: the real classes; token ids and targets are below it
};

using GptTensors = std::map<std::string, std::vector<double>>;

struct GptTensorShape {
  std::string name;
  std::vector<size_t> shape;
  size_t count() const {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    return n;
  }
};

// Every tensor of the model, in nanoGPT's state_dict order.
inline std::vector<GptTensorShape> gpt_tensor_shapes(const GptReferenceConfig& cfg) {
  const size_t C = static_cast<size_t>(cfg.n_embd);
  std::vector<GptTensorShape> shapes = {{"transformer.wte.weight", {static_cast<size_t>(cfg.vocab_padded), C}},
                                        {"transformer.wpe.weight", {static_cast<size_t>(cfg.block_size), C}}};
  for (int l = 0; l < cfg.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    shapes.push_back({p + "ln_1.weight", {C}});
    shapes.push_back({p + "ln_1.bias", {C}});
    shapes.push_back({p + "attn.c_attn.weight", {3 * C, C}});
    shapes.push_back({p + "attn.c_attn.bias", {3 * C}});
    shapes.push_back({p + "attn.c_proj.weight", {C, C}});
    shapes.push_back({p + "attn.c_proj.bias", {C}});
    shapes.push_back({p + "ln_2.weight", {C}});
    shapes.push_back({p + "ln_2.bias", {C}});
    shapes.push_back({p + "mlp.c_fc.weight", {4 * C, C}});
    shapes.push_back({p + "mlp.c_fc.bias", {4 * C}});
    shapes.push_back({p + "mlp.c_proj.weight", {C, 4 * C}});
    shapes.push_back({p + "mlp.c_proj.bias", {C}});
  }
  shapes.push_back({"transformer.ln_f.weight", {C}});
  shapes.push_back({"transformer.ln_f.bias", {C}});
  return shapes;
}

struct GptReferenceResult {
  double loss = 0;
  std::vector<double> logits;  // [B*T, Vp], padded columns included
  GptTensors grads;            // d loss / d tensor, every name of gpt_tensor_shapes; empty for forward only
};

namespace gpt_ref {

// Refuses, in one line naming the problem, what would otherwise read out of
// bounds: a missing, extra or mis-sized tensor, a token or target outside
// [0, V), a context longer than wpe, a width the heads do not divide.
inline void check_inputs(const GptReferenceConfig& cfg, const GptTensors& w, const std::vector<int32_t>& tokens,
                         const std::vector<int32_t>& targets, int batch, int seq) {
  auto fail = [](const std::string& what) { throw ddp::Error("gpt_reference: " + what); };
  if (cfg.n_layer < 1 || cfg.n_head < 1 || cfg.n_embd < 1 || cfg.n_embd % cfg.n_head != 0)
    fail("n_embd " + std::to_string(cfg.n_embd) + " is not a positive multiple of n_head " +
         std::to_string(cfg.n_head));
  if (cfg.vocab < 1 || cfg.vocab > cfg.vocab_padded) fail("vocab must be in [1, vocab_padded]");
  if (batch < 1 || seq < 1 || seq > cfg.block_size)
    fail("sequence length " + std::to_string(seq) + " outside [1, block_size " + std::to_string(cfg.block_size) + "]");
  const size_t rows = static_cast<size_t>(batch) * static_cast<size_t>(seq);
  if (tokens.size() != rows || targets.size() != rows) fail("tokens and targets must hold batch * seq ids");
  for (size_t i = 0; i < rows; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab || targets[i] < 0 || targets[i] >= cfg.vocab)
      fail("token or target id at position " + std::to_string(i) + " outside [0, vocab)");
  const auto shapes = gpt_tensor_shapes(cfg);
  if (w.size() != shapes.size())
    fail("expected " + std::to_string(shapes.size()) + " tensors, got " + std::to_string(w.size()));
  for (const auto& s : shapes) {
    const auto it = w.find(s.name);
    if (it == w.end()) fail("missing tensor " + s.name);
    if (it->second.size() != s.count())
      fail(s.name + " has " + std::to_string(it->second.size()) + " elements, expected " + std::to_string(s.count()));
  }
}

// What a block's backward needs from its forward.
struct BlockCache {
  LayerNormCache ln_1, ln_2;
  AttentionCache attn;
  Vec ln_1_out, qkv, attn_out, ln_2_out, fc_pre, fc_act;  // fc_pre: c_fc's output before the GELU
};

}  // namespace gpt_ref

enum class GptPass { forward_only, with_backward };

// tokens, targets: [batch, seq] row-major. Throws ddp::Error on bad input.
inline GptReferenceResult gpt_reference_run(const GptReferenceConfig& cfg, const GptTensors& w,
                                            const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets,
                                            int batch, int seq, GptPass pass = GptPass::with_backward) {
  using namespace gpt_ref;
  check_inputs(cfg, w, tokens, targets, batch, seq);
  const size_t B = static_cast<size_t>(batch), T = static_cast<size_t>(seq), N = B * T;
  const size_t C = static_cast<size_t>(cfg.n_embd), Vp = static_cast<size_t>(cfg.vocab_padded);
  const AttentionShape attn_shape{B, T, C, static_cast<size_t>(cfg.n_head)};
  auto W = [&](const std::string& name) -> const Vec& { return w.at(name); };
  auto block = [](int l) { return "transformer.h." + std::to_string(l) + "."; };

  // Embeddings: x[b*T + t] = wte[tokens[b, t]] + wpe[t].
  Vec x(N * C);
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      x[n * C + c] = W("transformer.wte.weight")[static_cast<size_t>(tokens[n]) * C + c] +
                     W("transformer.wpe.weight")[(n % T) * C + c];

  std::vector<BlockCache> caches(static_cast<size_t>(cfg.n_layer));
  for (int l = 0; l < cfg.n_layer; ++l) {
    BlockCache& k = caches[static_cast<size_t>(l)];
    const std::string p = block(l);
    k.ln_1_out = layernorm_forward(x, W(p + "ln_1.weight"), W(p + "ln_1.bias"), N, C, k.ln_1);
    k.qkv = linear_forward(k.ln_1_out, W(p + "attn.c_attn.weight"), &W(p + "attn.c_attn.bias"), N, C, 3 * C);
    k.attn_out = attention_forward(k.qkv, attn_shape, k.attn);
    const Vec attn_proj = linear_forward(k.attn_out, W(p + "attn.c_proj.weight"), &W(p + "attn.c_proj.bias"), N, C, C);
    for (size_t i = 0; i < x.size(); ++i) x[i] += attn_proj[i];
    k.ln_2_out = layernorm_forward(x, W(p + "ln_2.weight"), W(p + "ln_2.bias"), N, C, k.ln_2);
    k.fc_pre = linear_forward(k.ln_2_out, W(p + "mlp.c_fc.weight"), &W(p + "mlp.c_fc.bias"), N, C, 4 * C);
    k.fc_act.resize(k.fc_pre.size());
    for (size_t i = 0; i < k.fc_pre.size(); ++i) k.fc_act[i] = gelu_tanh(k.fc_pre[i]);
    const Vec mlp_proj = linear_forward(k.fc_act, W(p + "mlp.c_proj.weight"), &W(p + "mlp.c_proj.bias"), N, 4 * C, C);
    for (size_t i = 0; i < x.size(); ++i) x[i] += mlp_proj[i];
  }
  LayerNormCache ln_f;
  const Vec x_final = layernorm_forward(x, W("transformer.ln_f.weight"), W("transformer.ln_f.bias"), N, C, ln_f);

  GptReferenceResult result;
  // The tied head: logits = x_final wte^T, all Vp rows of wte.
  result.logits = linear_forward(x_final, W("transformer.wte.weight"), nullptr, N, C, Vp);
  Vec dlogits;
  result.loss = cross_entropy(result.logits, targets, N, Vp, static_cast<size_t>(cfg.vocab),
                              pass == GptPass::with_backward ? &dlogits : nullptr);
  if (pass == GptPass::forward_only) return result;

  GptTensors& g = result.grads;
  for (const auto& s : gpt_tensor_shapes(cfg)) g[s.name].assign(s.count(), 0.0);
  // Head: wte collects dlogits^T x_final here and the embedding's part below.
  const Vec dx_final =
      linear_backward(dlogits, x_final, W("transformer.wte.weight"), N, C, Vp, g["transformer.wte.weight"], nullptr);
  Vec dx = layernorm_backward(dx_final, W("transformer.ln_f.weight"), ln_f, N, C, g["transformer.ln_f.weight"],
                              g["transformer.ln_f.bias"]);
  for (int l = cfg.n_layer - 1; l >= 0; --l) {
    const BlockCache& k = caches[static_cast<size_t>(l)];
    const std::string p = block(l);
    // MLP half: dx flows straight through the residual and into the branch.
    const Vec dfc_act = linear_backward(dx, k.fc_act, W(p + "mlp.c_proj.weight"), N, 4 * C, C,
                                        g[p + "mlp.c_proj.weight"], &g[p + "mlp.c_proj.bias"]);
    Vec dfc_pre(dfc_act.size());
    for (size_t i = 0; i < dfc_pre.size(); ++i) dfc_pre[i] = dfc_act[i] * gelu_tanh_grad(k.fc_pre[i]);
    const Vec dln_2 = linear_backward(dfc_pre, k.ln_2_out, W(p + "mlp.c_fc.weight"), N, C, 4 * C,
                                      g[p + "mlp.c_fc.weight"], &g[p + "mlp.c_fc.bias"]);
    const Vec dx_mlp =
        layernorm_backward(dln_2, W(p + "ln_2.weight"), k.ln_2, N, C, g[p + "ln_2.weight"], g[p + "ln_2.bias"]);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dx_mlp[i];
    // Attention half.
    const Vec dattn_out = linear_backward(dx, k.attn_out, W(p + "attn.c_proj.weight"), N, C, C,
                                          g[p + "attn.c_proj.weight"], &g[p + "attn.c_proj.bias"]);
    const Vec dqkv = attention_backward(dattn_out, k.qkv, attn_shape, k.attn);
    const Vec dln_1 = linear_backward(dqkv, k.ln_1_out, W(p + "attn.c_attn.weight"), N, C, 3 * C,
                                      g[p + "attn.c_attn.weight"], &g[p + "attn.c_attn.bias"]);
    const Vec dx_attn =
        layernorm_backward(dln_1, W(p + "ln_1.weight"), k.ln_1, N, C, g[p + "ln_1.weight"], g[p + "ln_1.bias"]);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dx_attn[i];
  }
  // Embeddings: scatter-add into the rows that were read.
  Vec& dwte = g["transformer.wte.weight"];
  Vec& dwpe = g["transformer.wpe.weight"];
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c) {
      dwte[static_cast<size_t>(tokens[n]) * C + c] += dx[n * C + c];
      dwpe[(n % T) * C + c] += dx[n * C + c];
    }
  return result;
}

}  // namespace ddp::test
