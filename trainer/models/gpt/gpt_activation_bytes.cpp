// gpt_activation_bytes.cpp: the table in gpt_activation_bytes.h, line by line.
#include "trainer/models/gpt/gpt_activation_bytes.h"

namespace ddp {

GptActivationBytes gpt_activation_formula(const GptConfig& config, int batch, Recompute level) {
  const double r = static_cast<double>(batch) * config.block_size;                                      // R
  const double rc = r * config.n_embd;                                                                  // RC
  const double s = static_cast<double>(batch) * config.n_head * config.block_size * config.block_size;  // S
  const double layers = config.n_layer;
  const double layer_norm_slot = 2 * rc + 8 * r;   // out FP16 [R, C], mean and rstd FP32 [R]
  const double attention_kept = 2 * (4 * rc + s);  // q, k, v, merged rows [R, C] and P [B, nh, T, T], FP16
  const double mlp_kept = 2 * (4 * rc + 4 * rc);   // fc_pre and h, FP16 [R, 4C]

  GptActivationBytes bytes;
  // Shared at every level.
  bytes.residual = 2 * rc;              // branch
  bytes.layernorm = 2 * rc;             // d_ln
  bytes.attention = 2 * (11 * rc + s);  // qkv and d_qkv 3RC each, heads, dq, dk, dv, d_rows RC each; dS
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

}  // namespace ddp
