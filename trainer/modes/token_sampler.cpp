// token_sampler.cpp
#include "trainer/modes/token_sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/error.h"

namespace ddp {

int sample_token(const std::vector<float>& logits, const SamplingSettings& s, std::mt19937_64& rng) {
  DDP_REQUIRE(!logits.empty() && s.temperature >= 0 && s.top_k >= 0, "sample_token: logits and valid settings");
  const int n = static_cast<int>(logits.size());
  if (s.temperature == 0 || s.top_k == 1)
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<float> z(logits.size());
  const float inv_t = static_cast<float>(1.0 / s.temperature);
  for (int i = 0; i < n; ++i) z[i] = logits[i] * inv_t;
  float threshold = -std::numeric_limits<float>::infinity();
  if (s.top_k > 0 && s.top_k < n) {
    std::vector<float> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (s.top_k - 1), sorted.end(), std::greater<float>());
    threshold = sorted[s.top_k - 1];
  }
  // Softmax with the maximum subtracted (as the loss computes it); the
  // normalisation is folded into the draw: u is scaled by the sum.
  const float top = *std::max_element(z.begin(), z.end());
  std::vector<float> weight(z.size());
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += weight[i] = z[i] >= threshold ? std::exp(z[i] - top) : 0.0f;
  const float u = static_cast<float>(rng() >> 40) * 0x1p-24f;  // 24 random bits: uniform in [0, 1) in FP32
  const float target = u * sum;
  float acc = 0;
  int last_kept = 0;
  for (int i = 0; i < n; ++i) {
    if (weight[i] == 0) continue;
    acc += weight[i];
    last_kept = i;
    if (acc > target) return i;
  }
  return last_kept;  // rounding left acc a hair below target: the last class kept
}

}  // namespace ddp
