// gpt_config.h: the GPT's settings (--n-layer, --n-head, --n-embd,
// --block-size, the vocabulary from the data), its parameters as nanoGPT's
// state_dict names them, and the checks that need its shape. Read by the
// GPT's own files (its spec, gpt_spec.h, is its row of the model table).
// TrainConfig holds one; its flags are launch/cli/options.cpp's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/models/layers/attention_path.h"
#include "trainer/models/layers/classifier_logits.h"
#include "trainer/models/layers/recompute.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

struct TrainTestData;

struct GptConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int block_size = 128;  // T: positions (wpe rows) and the windows' length
  int vocab_size = 0;    // logits per position and wte rows: padded for the GEMMs (0: not yet bound to data)
  int real_vocab = 0;    // the tokenizer's: classes [real_vocab, vocab_size) never win
  // How it runs, not what it is (never recorded; every value trains the
  // same bits on the CPU): --classifier-chunk, the LM head's rows per chunk
  // (models/layers/tied_classifier.h), 0 for the unchunked head.
  int classifier_chunk = 0;
  // --classifier-logits: whether the chunked head keeps the logits for
  // backward or runs each chunk's backward in forward (classifier_logits.h);
  // never recorded, drop within an FP16 bit of keep in d_wte only.
  ClassifierLogits classifier_logits = ClassifierLogits::Keep;
  // --recompute: what backward runs again instead of keeping (recompute.h);
  // never recorded either, every level the same bits.
  Recompute recompute = Recompute::None;
  // --attention: explicit scores or FlashAttention's tiles (attention_path.h);
  // never recorded, auto resolved for the device by the model.
  AttentionPath attention = AttentionPath::Auto;
  int head_size() const { return n_embd / n_head; }
};

// nanoGPT's GPT: transformer.wte.weight [V, C], transformer.wpe.weight
// [T, C], per block i transformer.h.<i>.{ln_1, attn.c_attn, attn.c_proj,
// ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias} (nn.Linear layout [out, in]),
// transformer.ln_f.{weight, bias}; the LM head is wte (tied, stored once).
// Registered in the order backward finishes them: ln_f, then each block
// from the last (its MLP, ln_2, attention, ln_1), then wpe and wte (wte
// last: the embedding's backward adds to the head's gradient). Drawn in
// forward order with nanoGPT's initialisation: normal(0, 0.02), the two
// residual projections (c_proj) normal(0, 0.02 / sqrt(2 n_layer)), biases
// 0, LayerNorm gains 1. Weight decay on the tensors of rank >= 2 only (the
// embeddings and the linear weights), as nanoGPT's optimizer groups.
ParameterRegistry gpt_parameters(const GptConfig& gpt);
std::string gpt_block_prefix(int layer);  // "transformer.h.<layer>."

// What a checkpoint records of the GPT's shape: n_layer, n_head, n_embd,
// block_size, vocab_size, real_vocab.
std::vector<int64_t> gpt_dims(const GptConfig& gpt);
// For a checkpoint's dims: the first problem, or "" with `count` set to the
// parameter count they imply.
std::string gpt_dims_problem(const std::vector<int64_t>& dims, uint64_t& count);
// "4 layers, 4 heads, 128 wide, context 128, vocabulary 256"
std::string gpt_shape_text(const GptConfig& gpt);

// Model FLOPs per token of one training step: 6 x (parameters less the
// position table) for the matrix products, plus attention's 6 x 2 x
// n_layer x T x C (forward QK^T and PV, their backward twice), as in
// nanoGPT's estimate_mfu / PaLM's appendix.
double gpt_flops_per_token(const GptConfig& gpt);

// The data fits the model: token data whose windows are block_size long.
void check_gpt_matches_data(const GptConfig& gpt, const TrainTestData& data);

}  // namespace ddp
