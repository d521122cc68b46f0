// token_sampler.h: the next token from one position's logits, as nanoGPT's
// sample.py draws it: softmax(logits / temperature) over the classes kept
// by top-k, in FP32, from a seeded std::mt19937_64 so a seed reproduces a
// sample on any platform (the draw uses the generator's raw bits, not a
// standard-library distribution, whose algorithm is implementation-defined).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ddp {

struct SamplingSettings {
  double temperature = 1.0;  // 0: greedy (the first maximum, as torch.argmax); no draw
  int64_t top_k = 0;         // keep the k largest logits (ties with the k-th kept, as nanoGPT); 0: all
};

// The chosen class among logits_fp32 (the real classes only: a padded
// vocabulary's extra columns left out by the caller). top_k 1 is greedy too.
int sample_token(const std::vector<float>& logits_fp32, const SamplingSettings& settings, std::mt19937_64& rng);

}  // namespace ddp
