// synthetic_data.cpp: seeded draws for the y = A x + b + noise problem.
#include "trainer/data/synthetic_data.h"

#include <cmath>
#include <random>

#include "trainer/io/data_error.h"

namespace ddp {

namespace {

// SplitMix64's finaliser: turns related seeds (1, 2, 3, ...) into unrelated
// generator states, so problem and sample streams never overlap by accident.
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Distinct domains for the two kinds of seed.
constexpr uint64_t kProblemDomain = 0x70726f626c656dULL;  // "problem"
constexpr uint64_t kSampleDomain = 0x73616d706c65ULL;     // "sample"

// Standard normal deviates by the Box-Muller transform in Marsaglia's polar
// form: only +, *, sqrt (exact in IEEE) and log (within an ulp in every
// libm, and the FP32 result hides a last-bit difference of the double
// almost always), no sin/cos. Each accepted pair gives two deviates.
class NormalSource {
 public:
  explicit NormalSource(uint64_t seed) : rng_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * uniform() - 1.0;
      v = 2.0 * uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double factor = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = v * factor;
    has_spare_ = true;
    return u * factor;
  }

 private:
  // 53 random bits -> a double in (0, 1): (k + 0.5) / 2^53, exact.
  double uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; }

  std::mt19937_64 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace

SyntheticProblem make_synthetic_problem(uint64_t problem_seed, size_t in_dim, size_t out_dim) {
  if (in_dim == 0 || out_dim == 0) {
    throw DataError("synthetic data", "bad shape: in_dim and out_dim must be positive, got " + std::to_string(in_dim) +
                                          " and " + std::to_string(out_dim));
  }
  NormalSource normal(mix64(problem_seed ^ kProblemDomain));
  SyntheticProblem problem;
  problem.in_dim = in_dim;
  problem.out_dim = out_dim;
  const double weight_std = 1.0 / std::sqrt(static_cast<double>(in_dim));
  problem.weight.resize(out_dim * in_dim);
  for (float& w : problem.weight) w = static_cast<float>(weight_std * normal.next());
  problem.bias.resize(out_dim);
  for (float& b : problem.bias) b = static_cast<float>(normal.next());
  return problem;
}

Dataset sample_synthetic_dataset(const SyntheticProblem& problem, uint64_t sample_seed, size_t count, float noise) {
  if (!(noise >= 0.0f) || !std::isfinite(noise)) {
    throw DataError("synthetic data", "bad noise " + std::to_string(noise) + ": must be finite and >= 0");
  }
  const size_t in_dim = problem.in_dim, out_dim = problem.out_dim;
  NormalSource normal(mix64(sample_seed ^ kSampleDomain));
  Dataset data;
  data.count = count;
  data.features = in_dim;
  data.target_dim = out_dim;
  data.x.resize(count * in_dim);         // [count, in_dim]
  data.targets.resize(count * out_dim);  // [count, out_dim]
  // Per sample: its x, then its noise, so sample i never depends on count.
  for (size_t i = 0; i < count; ++i) {
    float* x = &data.x[i * in_dim];
    for (size_t k = 0; k < in_dim; ++k) x[k] = static_cast<float>(normal.next());
    for (size_t o = 0; o < out_dim; ++o) {
      double y = problem.bias[o];
      for (size_t k = 0; k < in_dim; ++k) y += static_cast<double>(problem.weight[o * in_dim + k]) * x[k];
      data.targets[i * out_dim + o] = static_cast<float>(y + noise * normal.next());
    }
  }
  data.source = "synthetic y = A x + b + noise (" + std::to_string(in_dim) + " -> " + std::to_string(out_dim) +
                ", noise " + std::to_string(noise) + ")";
  return data;
}

Dataset make_synthetic_dataset(uint64_t seed, size_t count, size_t in_dim, size_t out_dim, float noise,
                               uint64_t sample_stream) {
  const SyntheticProblem problem = make_synthetic_problem(seed, in_dim, out_dim);
  Dataset data = sample_synthetic_dataset(problem, mix64(seed) ^ mix64(~sample_stream), count, noise);
  data.source += ", seed " + std::to_string(seed) + " stream " + std::to_string(sample_stream);
  return data;
}

Dataset make_random_dataset(uint64_t seed, size_t count, size_t in_dim, size_t out_dim, bool classification) {
  std::mt19937_64 rng(mix64(seed));
  // Top 24 bits to [-1, 1): exact in FP32, no library-specific distribution.
  auto uniform = [&rng] { return static_cast<float>(static_cast<int64_t>(rng() >> 40) - (1 << 23)) / (1 << 23); };
  Dataset data;
  data.count = count;
  data.features = in_dim;
  data.x.resize(count * in_dim);
  for (float& v : data.x) v = uniform();
  if (classification) {
    data.num_classes = static_cast<int>(out_dim);
    data.labels.resize(count);
    for (int32_t& l : data.labels) l = static_cast<int32_t>(rng() % out_dim);
  } else {
    data.target_dim = out_dim;
    data.targets.resize(count * out_dim);
    for (float& v : data.targets) v = uniform();
  }
  data.source = "random (" + std::to_string(in_dim) + " -> " + std::to_string(out_dim) + ", benchmark)";
  return data;
}

Dataset make_random_token_windows(uint64_t seed, size_t count, size_t block_size, int vocab_size) {
  std::mt19937_64 rng(mix64(seed));
  const auto vocab = static_cast<uint64_t>(vocab_size);
  Dataset data;
  data.count = count;
  data.tokens_per_sample = block_size;
  data.vocab_size = data.real_vocab_size = data.num_classes = vocab_size;
  data.token_ids.resize(count * block_size);  // [count, T]
  data.labels.resize(count * block_size);     // [count, T]
  // One stream of count * T + 1 ids: window i's labels are window i+1's ids shifted in.
  int32_t previous = static_cast<int32_t>(rng() % vocab);
  for (size_t k = 0; k < count * block_size; ++k) {
    const auto next = static_cast<int32_t>(rng() % vocab);
    data.token_ids[k] = previous;
    data.labels[k] = next;
    previous = next;
  }
  data.source = "random token windows (T " + std::to_string(block_size) + ", vocabulary " + std::to_string(vocab_size) +
                ", benchmark)";
  return data;
}

}  // namespace ddp
