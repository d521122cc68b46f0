// test_data_synthetic.cpp: the synthetic problem generator (shapes,
// determinism, golden values, train and test sharing the problem, standard
// normal features), the benchmark's random token windows, and
// validate_dataset's checks of any dataset.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/data_file_support.h"
#include "trainer/data/dataset.h"
#include "trainer/data/synthetic_data.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using namespace test;  // data_file_support.h: file builders, expect_data_error

// ---- synthetic --------------------------------------------------------------------

TEST(DataSynthetic, ShapesAndDeterminism) {
  const Dataset a = make_synthetic_dataset(42, 100);
  EXPECT_EQ(a.count, 100u);
  EXPECT_EQ(a.features, 10u);
  EXPECT_EQ(a.target_dim, 10u);
  EXPECT_EQ(a.x.size(), 1000u);
  EXPECT_EQ(a.targets.size(), 1000u);
  EXPECT_FALSE(a.is_classification());
  EXPECT_NO_THROW(validate_dataset(a, a.source));
  const Dataset again = make_synthetic_dataset(42, 100);
  EXPECT_EQ(std::memcmp(a.x.data(), again.x.data(), 4 * a.x.size()), 0);
  EXPECT_EQ(std::memcmp(a.targets.data(), again.targets.data(), 4 * a.targets.size()), 0);
  EXPECT_NE(make_synthetic_dataset(43, 100).x, a.x);
  // Sample i does not depend on how many samples were asked for.
  const Dataset prefix = make_synthetic_dataset(42, 7);
  EXPECT_EQ(prefix.x, std::vector<float>(a.x.begin(), a.x.begin() + 70));
  EXPECT_EQ(prefix.targets, std::vector<float>(a.targets.begin(), a.targets.begin() + 70));
}

TEST(DataSynthetic, GoldenValuesPinTheGenerator) {
  // Bit patterns from the reference build; a platform or library change
  // that alters them breaks cross-machine reproducibility of runs.
  const Dataset d = make_synthetic_dataset(1234, 2, 3, 2, 0.01f, 0);
  const SyntheticProblem p = make_synthetic_problem(1234, 3, 2);
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  const std::vector<uint32_t> want_x = {0x3fddcf4f, 0x3fac06f7, 0x3efe55d3, 0x3f7de84c, 0xbfe4e60d, 0x3f8cb280};
  const std::vector<uint32_t> want_w = {0x3ef87f96, 0x3f54bdf2, 0x3e937bf2, 0x3ead6f6f, 0xbc23c55e, 0xbe9c603a};
  const std::vector<uint32_t> want_y = {0x3f68f25a, 0xbf84abb8, 0xbff39e7e, 0xbfb71e13};
  ASSERT_EQ(d.x.size(), want_x.size());
  ASSERT_EQ(p.weight.size(), want_w.size());
  ASSERT_EQ(d.targets.size(), want_y.size());
  for (size_t i = 0; i < want_x.size(); ++i) EXPECT_EQ(bits(d.x[i]), want_x[i]) << "x " << i << " = " << d.x[i];
  for (size_t i = 0; i < want_w.size(); ++i)
    EXPECT_EQ(bits(p.weight[i]), want_w[i]) << "w " << i << " = " << p.weight[i];
  for (size_t i = 0; i < want_y.size(); ++i)
    EXPECT_EQ(bits(d.targets[i]), want_y[i]) << "y " << i << " = " << d.targets[i];
}

TEST(DataSynthetic, TrainAndTestShareTheProblemNotTheSamples) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Dataset train = make_synthetic_dataset(seed, 500, 10, 10, 0.01f, 0);
  const Dataset test = make_synthetic_dataset(seed, 500, 10, 10, 0.01f, 1);
  EXPECT_NE(train.x, test.x);
  const SyntheticProblem problem = make_synthetic_problem(seed, 10, 10);
  // Residual y - (A x + b) is the noise: std 0.01, so 6 sigma bounds it.
  for (const Dataset* data : {&train, &test}) {
    double max_residual = 0;
    for (size_t i = 0; i < data->count; ++i) {
      for (size_t o = 0; o < 10; ++o) {
        double y = problem.bias[o];
        for (size_t k = 0; k < 10; ++k) y += double{problem.weight[o * 10 + k]} * data->x[i * 10 + k];
        max_residual = std::max(max_residual, std::fabs(data->targets[i * 10 + o] - y));
      }
    }
    EXPECT_LT(max_residual, 0.06);
    EXPECT_GT(max_residual, 0.01);  // the noise is there
  }
  // noise 0: y is A x + b up to the final FP32 rounding.
  const Dataset exact = make_synthetic_dataset(seed, 50, 10, 10, 0.0f, 2);
  for (size_t i = 0; i < 50; ++i) {
    double y = problem.bias[0];
    for (size_t k = 0; k < 10; ++k) y += double{problem.weight[k]} * exact.x[i * 10 + k];
    EXPECT_EQ(exact.targets[i * 10], static_cast<float>(y));
  }
}

TEST(DataSynthetic, FeaturesAreStandardNormal) {
  const Dataset data = make_synthetic_dataset(test::test_seed(), 20000, 10, 1);
  double sum = 0, sum_sq = 0, fourth = 0;
  for (float v : data.x) {
    sum += v;
    sum_sq += double{v} * v;
    fourth += double{v} * v * v * v;
  }
  const double n = static_cast<double>(data.x.size());
  // n = 2e5: the mean's standard error is 0.0022, the variance's 0.0032;
  // bounds at ~9 standard errors never fail by chance.
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.03);
  EXPECT_NEAR(fourth / n, 3.0, 0.15);  // kurtosis of a normal: tails are right
}

TEST(DataSynthetic, BadArguments) {
  expect_data_error([] { make_synthetic_dataset(1, 10, 0, 10); }, {"synthetic", "in_dim"});
  expect_data_error([] { make_synthetic_dataset(1, 10, 10, 10, -1.0f); }, {"synthetic", "noise"});
  expect_data_error([] { validate_dataset(make_synthetic_dataset(1, 0), "synthetic"); }, {"synthetic", "empty"});
}

// --bench --model gpt: windows laid out as a real stream's (token_windows.h),
// every id a possible one, a valid token data set, the same for one seed.
TEST(DataSynthetic, RandomTokenWindowsAreOneStreamShiftedByOne) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const size_t count = 5, t = 7;
  const int vocab = 11;
  const Dataset d = make_random_token_windows(seed, count, t, vocab);
  ASSERT_EQ(d.count, count);
  ASSERT_EQ(d.tokens_per_sample, t);
  ASSERT_EQ(d.token_ids.size(), count * t);
  ASSERT_EQ(d.labels.size(), count * t);
  EXPECT_EQ(d.vocab_size, vocab);
  EXPECT_EQ(d.num_classes, vocab);
  EXPECT_NO_THROW(validate_dataset(d, "random windows"));
  for (size_t k = 0; k + 1 < count * t; ++k) EXPECT_EQ(d.labels[k], d.token_ids[k + 1]) << "position " << k;
  std::vector<int> seen(vocab, 0);
  for (int32_t id : d.token_ids) ++seen.at(static_cast<size_t>(id));
  EXPECT_GT(std::count_if(seen.begin(), seen.end(), [](int n) { return n > 0; }), vocab / 2) << "ids spread";
  const Dataset again = make_random_token_windows(seed, count, t, vocab);
  EXPECT_EQ(again.token_ids, d.token_ids);
  EXPECT_EQ(again.labels, d.labels);
  EXPECT_NE(make_random_token_windows(seed + 1, count, t, vocab).token_ids, d.token_ids);
}

// ---- validate_dataset ---------------------------------------------------------------

Dataset small_classification() {
  Dataset d;
  d.count = 2;
  d.features = 3;
  d.x = {0, 1, 2, 3, 4, 5};
  d.labels = {1, 0};
  d.num_classes = 2;
  return d;
}

TEST(DataValidate, AcceptsConsistentAndRejectsInconsistent) {
  EXPECT_NO_THROW(validate_dataset(small_classification(), "ok"));
  Dataset nan = small_classification();
  nan.x[5] = std::numeric_limits<float>::quiet_NaN();
  expect_data_error([&] { validate_dataset(nan, "v.bin"); }, {"v.bin: non-finite value (nan) in sample 1, feature 2"});
  Dataset inf = small_classification();
  inf.x[0] = std::numeric_limits<float>::infinity();
  expect_data_error([&] { validate_dataset(inf, "v.bin"); }, {"v.bin: non-finite value (inf) in sample 0, feature 0"});
  Dataset shape = small_classification();
  shape.x.pop_back();
  expect_data_error([&] { validate_dataset(shape, "v.bin"); }, {"v.bin", "mismatch"});
  Dataset count = small_classification();
  count.labels.push_back(0);
  expect_data_error([&] { validate_dataset(count, "v.bin"); }, {"v.bin", "count mismatch"});
  Dataset negative = small_classification();
  negative.labels[1] = -1;
  expect_data_error([&] { validate_dataset(negative, "v.bin"); }, {"v.bin", "bad label -1 in sample 1"});
  Dataset classes = small_classification();
  classes.num_classes = 1;
  expect_data_error([&] { validate_dataset(classes, "v.bin"); }, {"v.bin", "num_classes"});
  Dataset both = small_classification();
  both.target_dim = 1;
  both.targets = {0, 1};
  expect_data_error([&] { validate_dataset(both, "v.bin"); }, {"v.bin", "both"});
  Dataset neither = small_classification();
  neither.labels.clear();
  expect_data_error([&] { validate_dataset(neither, "v.bin"); }, {"v.bin", "neither"});
}

}  // namespace
}  // namespace ddp
