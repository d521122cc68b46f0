// training_sampler.h: --sample-every N: after every N-th optimizer step
// rank 0 prints a sample of the next-token model being trained (the GPT),
// drawn from its current FP16 weights as --generate draws (generation.h:
// sample_tokens, the same forward and token_sampler.h draw) and decoded
// with the data's tokenizer (text_codec.h): --sample-length tokens after
// --prompt (without it: a newline for bytes, <|endoftext|> for GPT-2),
// temperature 0.8 and top-k 40 unless --temperature / --top-k are given,
// seeded by --seed + step so a step's sample is reproducible and no stream
// of the run is advanced.
//
// The sampler owns a model of its own built for one row, so the training
// model's buffers and state are not touched; it reads the trainer's
// weights. Nothing in it is collective: the other ranks go on to the next
// step and wait for rank 0 in its all-reduce.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "trainer/config/train_config.h"
#include "trainer/models/gpt/gpt_config.h"
#include "trainer/models/model_spec.h"
#include "trainer/models/model.h"
#include "trainer/modes/text_codec.h"
#include "trainer/modes/token_sampler.h"

namespace ddp {

// The bytes as one line of a log: printable ASCII as is, a backslash as
// \\, newline, tab and carriage return as \n, \t, \r, every other byte as
// \xHH; whatever a model draws, its sample is one line.
std::string escaped_bytes(const std::string& bytes);

class TrainingSampler {
 public:
  // Whether `config` (bound to the data: its vocabulary, context and
  // tokenizer) can be sampled: a next-token model of a known tokenizer (the
  // GPT-2 ranks file read and checked), the prompt within its context and
  // vocabulary, a given --top-k within it. Throws one line naming the flag.
  // Every rank calls it, so every rank refuses alike.
  static void check(const TrainConfig& config);

  TrainingSampler(const TrainConfig& config, Backend& backend);
  ~TrainingSampler();

  // "sample (step S): TEXT" from `weights_lowp` (one entry per tensor of
  // the model's registry), TEXT escaped_bytes of the sample's decoded bytes.
  std::string sample_line(const WeightTable& weights_lowp, int64_t step);

 private:
  Backend& backend_;
  TokenShape shape_;  // the model's windows and vocabulary
  int64_t length_tokens_;
  uint64_t seed_;
  bool kv_cache_;  // --kv-cache on, for the GPT (generation.h: sample_tokens_cached)
  GptConfig gpt_;
  TextCodec codec_;
  std::vector<int32_t> prompt_ids_;
  std::unique_ptr<Model> model_;  // one row; null with the KV cache
  SamplingSettings settings_;
};

}  // namespace ddp
