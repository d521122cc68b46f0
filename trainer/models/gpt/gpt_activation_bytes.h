// gpt_activation_bytes.h: the bytes the GPT's blocks and their shared
// scratch (models/layers/transformer_block.h) allocate for activations, by
// kind, in closed form for each --recompute level; GptModel's
// activation_bytes_by_kind() measures the same from its buffers. The
// embeddings', ln_f's and the head's buffers are not counted (the head's
// are classifier_bytes, models/layers/tied_classifier.h).
//
// In bytes (FP16 2, FP32 4), R = B*T rows, C channels, nh heads, T
// context, L layers, S = B*nh*T^2 attention scores:
//   per layer                       none            light          block
//     residual   (x, m)             4RC             4RC            2RC (x)
//     layernorm  (ln_1, ln_2: out,  2(2RC + 8R)     0              0
//                 mean, rstd)
//     attention  (q, k, v, merged   2(4RC + S)      2(4RC + S)     0
//                 rows, P)
//     mlp        (fc_pre, h)        16RC            0              0
//   shared, once
//     residual   branch             2RC             2RC            2RC + 2RC (m)
//     layernorm  d_ln               2RC             2RC + (2RC+8R) 2RC + (2RC+8R)   (one LN slot)
//     attention  qkv, d_qkv,        22RC + 2S       22RC + 2S      22RC + 2S + 2(4RC + S)
//                heads, dq, dk, dv,
//                d_rows, dS
//     mlp        d_hidden           8RC             8RC + 16RC     8RC + 16RC
// So the per-layer totals are none 4RC + 2(2RC+8R) + 2(4RC+S) + 16RC,
// light 4RC + 2(4RC+S), block 2RC; qkv is scratch at every level (backward
// reads q, k, v once split).
#pragma once

#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/layers/recompute.h"
#include "trainer/report/activation_bytes.h"

namespace ddp {

struct GptActivationBytes {
  double attention = 0;
  double mlp = 0;
  double layernorm = 0;
  double residual = 0;  // the residual stream: each block's x (and m), the branch before its add
  double total() const { return attention + mlp + layernorm + residual; }
};

// At `batch` windows of config.block_size tokens (the model's max_batch).
GptActivationBytes gpt_activation_formula(const GptConfig& config, int batch, Recompute level);

// The whole model's, by the kinds the banner shows (trainer/report/
// activation_bytes.h): the blocks' above, and outside the blocks ln_f's
// slot (2RC + 8R, layernorm), x_L and the residual stream's gradient (4RC,
// residual) and the head's logits (classifier: 4RV unchunked, the logits
// and their gradient; 2RV + 4R chunked, the logits and the rows' losses;
// V the padded vocabulary). `measured` is GptModel's from its buffers.
struct GptModelBytes {
  GptActivationBytes blocks;
  double ln_f = 0;
  double residual_outside = 0;
  double classifier = 0;
};
GptModelBytes gpt_model_formula(const GptConfig& config, int batch);
ActivationKinds gpt_activation_kinds(const GptConfig& config, const GptModelBytes& measured,
                                     const GptModelBytes& formula);

}  // namespace ddp
