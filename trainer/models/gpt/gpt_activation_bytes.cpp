// gpt_activation_bytes.cpp: the table in gpt_activation_bytes.h, line by line.
#include "trainer/models/gpt/gpt_activation_bytes.h"

#include <string>

#include "kernels/error.h"
#include "trainer/models/layers/tied_classifier.h"

namespace ddp {

namespace {
// The formulas take the path the model runs: auto is the model's to
// resolve (it knows the device), so a config given here names one.
AttentionPath resolved_attention(const GptConfig& config) {
  DDP_REQUIRE(config.attention != AttentionPath::Auto,
              "gpt_activation_formula: resolve --attention auto for the device first");
  return config.attention;
}
}  // namespace

GptActivationBytes gpt_activation_formula(const GptConfig& config, int batch, Recompute level) {
  const double r = static_cast<double>(batch) * config.block_size;                                      // R
  const double rc = r * config.n_embd;                                                                  // RC
  const double s = static_cast<double>(batch) * config.n_head * config.block_size * config.block_size;  // S
  const double layers = config.n_layer;
  const double layer_norm_slot = 2 * rc + 8 * r;   // out FP16 [R, C], mean and rstd FP32 [R]
  // q, k, v, merged rows [R, C] FP16, and P [B, nh, T, T] FP16 (explicit) or
  // the log-sum-exp [B, nh, T] FP32 (fused).
  const bool fused = resolved_attention(config) == AttentionPath::Fused;
  const double z = static_cast<double>(batch) * config.n_head * config.block_size;  // Z = B nh T
  const double attention_kept = fused ? 2 * 4 * rc + 4 * z : 2 * (4 * rc + s);
  const double mlp_kept = 2 * (4 * rc + 4 * rc);   // fc_pre and h, FP16 [R, 4C]

  GptActivationBytes bytes;
  // Shared at every level.
  bytes.residual = 2 * rc;              // branch
  bytes.layernorm = 2 * rc;             // d_ln
  // qkv and d_qkv 3RC each, heads, dq, dk, dv, d_rows RC each; dS (explicit)
  // or the heads' output again (fused).
  bytes.attention = 2 * (11 * rc + (fused ? rc : s));
  bytes.mlp = 2 * 4 * rc;               // d_hidden
  switch (level) {
    case Recompute::None:
      bytes.residual += layers * 2 * (2 * rc);
      bytes.layernorm += layers * 2 * layer_norm_slot;
      bytes.attention += layers * attention_kept;
      bytes.mlp += layers * mlp_kept;
      break;
    case Recompute::Light:
      bytes.residual += layers * 2 * (2 * rc);
      bytes.layernorm += layer_norm_slot;
      bytes.attention += layers * attention_kept;
      bytes.mlp += mlp_kept;
      break;
    case Recompute::Block:
      bytes.residual += layers * 2 * rc + 2 * rc;  // each x, and one m
      bytes.layernorm += layer_norm_slot;
      bytes.attention += attention_kept;
      bytes.mlp += mlp_kept;
      break;
  }
  return bytes;
}

GptModelBytes gpt_model_formula(const GptConfig& config, int batch) {
  const double r = static_cast<double>(batch) * config.block_size;
  const double rc = r * config.n_embd;
  GptModelBytes bytes;
  bytes.blocks = gpt_activation_formula(config, batch, config.recompute);
  bytes.ln_f = 2 * rc + 8 * r;
  bytes.residual_outside = 2 * (2 * rc);
  const double rv = r * config.vocab_size;
  bytes.classifier = config.classifier_chunk > 0 ? 2 * rv + 4 * r : 2 * (2 * rv);
  if (config.classifier_logits == ClassifierLogits::Drop) {  // P: the largest chunk's rows
    const double p =
        classifier_chunk_capacity(static_cast<size_t>(r), config.vocab_size, config.n_embd, config.classifier_chunk);
    bytes.classifier = 2 * p * config.vocab_size + 4 * r + 2 * rc + 4.0 * config.vocab_size * config.n_embd;
  }
  return bytes;
}

namespace {
// Each kind's formula in symbols, ln_f, x_L and dx folded in (S = B nh T^2).
struct KindSymbols {
  const char* attention;
  const char* mlp;
  const char* layernorm;
  const char* residual;
};
// Z = B nh T (fused's log-sum-exp rows).
KindSymbols symbols(Recompute level, bool fused) {
  const char* per_layer_attention = fused ? "L(8RC + 4Z) + 24RC" : "L(8RC + 2S) + 22RC + 2S";
  switch (level) {
    case Recompute::Light:
      return {per_layer_attention, "24RC", "6RC + 16R", "4LRC + 6RC"};
    case Recompute::Block:
      return {fused ? "32RC + 4Z" : "30RC + 4S", "24RC", "6RC + 16R", "2LRC + 8RC"};
    case Recompute::None:
      break;
  }
  return {per_layer_attention, "L 16RC + 8RC", "L(4RC + 16R) + 4RC + 8R", "4LRC + 6RC"};
}

// The classifier's formula in symbols (P = the dropped head's chunk rows).
std::string classifier_symbols(const GptConfig& config) {
  if (config.classifier_logits == ClassifierLogits::Drop) return "2PV + 4R + 2RC + 4VC (P: the largest chunk's rows)";
  return config.classifier_chunk > 0 ? "2RV + 4R" : "4RV";
}

}  // namespace

ActivationKinds gpt_activation_kinds(const GptConfig& config, const GptModelBytes& measured,
                                     const GptModelBytes& formula) {
  const KindSymbols text = symbols(config.recompute, resolved_attention(config) == AttentionPath::Fused);
  const auto bytes = [](double b) { return static_cast<size_t>(b); };
  const GptActivationBytes& m = measured.blocks;
  const GptActivationBytes& f = formula.blocks;
  return {
      {"attention", bytes(m.attention), f.attention, text.attention},
      {"mlp", bytes(m.mlp), f.mlp, text.mlp},
      {"layernorm", bytes(m.layernorm + measured.ln_f), f.layernorm + formula.ln_f, text.layernorm},
      {"residual", bytes(m.residual + measured.residual_outside), f.residual + formula.residual_outside, text.residual},
      {"classifier", bytes(measured.classifier), formula.classifier, classifier_symbols(config)},
  };
}

}  // namespace ddp
