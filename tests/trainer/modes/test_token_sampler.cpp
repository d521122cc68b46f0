// test_token_sampler.cpp: sample_token against its definition on fresh
// random logits: greedy is the first maximum; draws follow
// softmax(logits / T) within a stated statistical tolerance; top-k never
// draws outside the k largest (and reaches each of them); a seed repeats
// the draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "support/test_support.h"
#include "trainer/modes/token_sampler.h"

namespace ddp {
namespace {

std::vector<float> random_logits(std::mt19937_64& rng, int n, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(TokenSampler, GreedyIsTheFirstMaximumAndDrawsNothing) {
  std::mt19937_64 data(test::test_seed());
  std::vector<float> logits = random_logits(data, 37, 2.0f);
  const int top = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  logits.push_back(logits[top]);  // a tie after it: the first wins, as torch.argmax
  std::mt19937_64 rng(3), untouched(3);
  EXPECT_EQ(sample_token(logits, {0.0, 0}, rng), top);
  EXPECT_EQ(sample_token(logits, {1.5, 1}, rng), top);  // top-k 1 is greedy at any temperature
  EXPECT_EQ(rng(), untouched());
}

TEST(TokenSampler, DrawsFollowTheTemperedSoftmax) {
  std::mt19937_64 data(test::test_seed());
  const int n = 6, draws = 30000;
  const std::vector<float> logits = random_logits(data, n, 1.5f);
  for (const double t : {0.5, 1.0, 2.0}) {
    std::vector<double> want(n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += want[i] = std::exp(logits[i] / t);
    std::vector<int> seen(n, 0);
    std::mt19937_64 rng(test::test_seed() + 1);
    for (int d = 0; d < draws; ++d) ++seen[sample_token(logits, {t, 0}, rng)];
    for (int i = 0; i < n; ++i) {
      const double p = want[i] / sum, sigma = std::sqrt(p * (1 - p) / draws);
      // 5 sigma of a binomial frequency: a correct sampler fails ~1 in 10^6 per class.
      EXPECT_NEAR(seen[i] / double(draws), p, 5 * sigma + 1e-4) << "class " << i << " at temperature " << t;
    }
  }
}

TEST(TokenSampler, TopKDrawsOnlyAndEveryOneOfTheKLargest) {
  std::mt19937_64 data(test::test_seed());
  const int n = 50;
  const std::vector<float> logits = random_logits(data, n, 0.3f);  // flat: every class likely without top-k
  const int k = 2 + static_cast<int>(data() % 5);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  const float kth = sorted[k - 1];
  std::vector<int> seen(n, 0);
  std::mt19937_64 rng(test::test_seed() + 2);
  for (int d = 0; d < 4000; ++d) ++seen[sample_token(logits, {1.0, k}, rng)];
  for (int i = 0; i < n; ++i) {
    if (logits[i] >= kth)
      EXPECT_GT(seen[i], 0) << "class " << i << " is among the " << k << " largest";
    else
      EXPECT_EQ(seen[i], 0) << "class " << i << " is outside the " << k << " largest";
  }
}

TEST(TokenSampler, ASeedRepeatsTheDraws) {
  std::mt19937_64 data(test::test_seed());
  const std::vector<float> logits = random_logits(data, 256, 1.0f);
  std::mt19937_64 a(42), b(42), c(43);
  std::vector<int> da, db, dc;
  for (int i = 0; i < 200; ++i) {
    da.push_back(sample_token(logits, {0.9, 40}, a));
    db.push_back(sample_token(logits, {0.9, 40}, b));
    dc.push_back(sample_token(logits, {0.9, 40}, c));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
  for (int v : da) EXPECT_TRUE(v >= 0 && v < 256);
}

}  // namespace
}  // namespace ddp
