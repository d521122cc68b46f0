// synthetic_data.h: the seed regression problem y = A x + b + noise, which a
// single Linear(in_dim, out_dim) layer can fit down to the noise floor: the
// smallest end-to-end test of the trainer with a known answer.
// Bit-identical on every platform for a given seed: std::mt19937_64 is fully
// specified, and the normal deviates come from our own transform, not from
// std::normal_distribution, whose algorithm each library chooses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainer/data/dataset.h"

namespace ddp {

struct SyntheticProblem {
  size_t in_dim = 0;
  size_t out_dim = 0;
  std::vector<float> weight;  // A [out_dim, in_dim], N(0, 1/in_dim): unit-variance outputs
  std::vector<float> bias;    // b [out_dim], N(0, 1)
};

// A and b, a pure function of the problem seed and the sizes.
SyntheticProblem make_synthetic_problem(uint64_t problem_seed, size_t in_dim, size_t out_dim);

// `count` samples x ~ N(0, I), y = A x + b + noise * N(0, I), drawn from
// `sample_seed` (y computed in double from the stored FP32 x and A).
Dataset sample_synthetic_dataset(const SyntheticProblem& problem, uint64_t sample_seed, size_t count, float noise);

// The trainer's entry point: A and b from `seed`; the samples from `seed`
// and `sample_stream`, so a train set (stream 0) and a test set (stream 1)
// share the problem but not a single sample.
Dataset make_synthetic_dataset(uint64_t seed, size_t count, size_t in_dim = 10, size_t out_dim = 10,
                               float noise = 0.01f, uint64_t sample_stream = 0);

// Throughput benchmarks (`--bench`): `count` samples of uniform random
// features in [-1, 1) and uniform random class labels (classification) or
// targets in [-1, 1), with no structure to learn: cheap to draw at any width.
Dataset make_random_dataset(uint64_t seed, size_t count, size_t in_dim, size_t out_dim, bool classification);

// `--bench --model gpt`: `count` windows of `block_size` token ids uniform in
// [0, vocab_size), in the token form of Dataset, each window's labels its ids
// shifted by one (the next token, the last one drawn too), as
// make_token_windows lays out a real stream: the same work per step as text.
Dataset make_random_token_windows(uint64_t seed, size_t count, size_t block_size, int vocab_size);

}  // namespace ddp
