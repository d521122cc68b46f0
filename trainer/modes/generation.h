// generation.h: --generate N --prompt TEXT [--temperature T --top-k K
// --seed S]: N tokens sampled from a GPT after the prompt, from a checkpoint
// (--resume PATH, or the newest valid in --checkpoint-dir) or --init-weights.
// No data is read: a checkpoint records the GPT's shape (n_layer, n_head,
// n_embd, block_size, vocab_size, real_vocab) and its tokenizer, and shape
// flags given with it must agree; with --init-weights the shape is the
// flags', the vocabulary --vocab-size or the 256 bytes. The prompt is
// encoded and the tokens decoded with the model's tokenizer (text_codec.h):
// the checkpoint's or the weights' record, which --tokenizer may repeat but
// not contradict; weights that record none are bytes when their vocabulary
// is, and need --tokenizer otherwise.
// FP16 forward with a KV cache (--kv-cache off: every token runs the model
// on the last block_size tokens of prompt + output). stdout gets the generated text
// alone, raw bytes as the tokenizer decodes them; status lines go to stderr.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "trainer/config/train_config.h"
#include "trainer/models/gpt/gpt_decoder.h"
#include "trainer/models/model.h"
#include "trainer/models/model_spec.h"
#include "trainer/modes/text_codec.h"
#include "trainer/modes/token_sampler.h"

namespace ddp {

struct GenerationPlan {
  TrainConfig config;               // its model's settings bound to the weights' shape and tokenizer
  std::vector<float> weights_fp32;  // the flat layout of the model's registry
  std::string source;               // "checkpoint PATH" or "weights PATH", for the status line
  TextCodec codec;                  // the model's tokenizer
  std::vector<int32_t> prompt_ids;  // --prompt encoded
};

// Everything that can refuse the input, before a device is chosen: the
// weights found, read and checked against the shape; the tokenizer (known,
// fitting the vocabulary, not contradicting --tokenizer); the prompt within
// block_size tokens, each a class of the model; --top-k within the
// vocabulary. Throws one line.
GenerationPlan plan_generation(const TrainConfig& config);

// The tokenizer of a model whose weights record `recorded` ("" none) and
// whose real vocabulary is `real_vocab`, with --tokenizer `flag` ("" not
// given), for `mode`: the record, which the flag must repeat; the flag where
// nothing is recorded; bytes for a byte-sized vocabulary; else one line
// asking for --tokenizer. Throws too for a tokenizer the vocabulary does not fit.
std::string sampling_tokenizer(const std::string& recorded, const std::string& flag, int real_vocab,
                               const std::string& source, const std::string& mode);

// What --generate and --sample-every (training_sampler.h) both refuse of the
// next-token model of shape `g` they sample: a prompt of more tokens than the
// context or with an id outside the vocabulary, a `top_k` above it (0: none
// given); `mode` names the flag. Throws one line.
void check_sampling(const TokenShape& g, const std::vector<int32_t>& prompt_ids, int64_t top_k,
                    const std::string& mode);

// `count` tokens drawn after `prompt_ids` (at least one) from the next-token
// model `model` (its windows and vocabulary `g`, on `backend`, built for at
// least one row) at `weights_lowp` (one entry per tensor of its registry),
// from a std::mt19937_64 seeded with `seed`; `emit` gets each id as it is
// drawn, and `observe_logits` (if given) the FP32 logits of the real classes
// it was drawn from. One FP16 forward per token, nothing collective.
void sample_tokens(Backend& backend, Model& model, const TokenShape& g, const WeightTable& weights_lowp,
                   const std::vector<int32_t>& prompt_ids, int64_t count, const SamplingSettings& settings,
                   uint64_t seed, const std::function<void(int)>& emit,
                   const std::function<void(const std::vector<float>&)>& observe_logits = nullptr);

// The same draws from the GPT's KV-cache decoder (reset here, then fed the
// prompt once and each drawn token): the logits are the window's (within
// test_gpt_decoder.cpp's tolerance; bitwise on the CPU in practice), so the
// tokens are those of sample_tokens; past the context it crops as
// sample_tokens does (the last block_size tokens).
void sample_tokens_cached(GptDecoder& decoder, const std::vector<int32_t>& prompt_ids, int64_t count,
                          const SamplingSettings& settings, uint64_t seed, const std::function<void(int)>& emit,
                          const std::function<void(const std::vector<float>&)>& observe_logits = nullptr);

// Samples config.generate_tokens tokens and writes their bytes to `out`,
// flushed after each (a reader sees the text as it grows); one status line
// to `status`; the logits to --generate-logits at the end, when given.
void run_generation(const GenerationPlan& plan, Backend& backend, std::FILE* out, std::FILE* status);

}  // namespace ddp
