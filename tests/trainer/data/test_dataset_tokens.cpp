// test_dataset_tokens.cpp: validate_dataset on token data (windows of T
// token ids, one label per position). A fresh random data set per case; one
// value or one size is broken at a random place, and the one-line DataError
// must name it: the file, the sample and position, the value and the bound.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "trainer/io/data_error.h"
#include "trainer/data/dataset.h"
#include "support/data_file_support.h"
#include "support/test_support.h"

namespace ddp {
namespace {

Dataset random_token_dataset(std::mt19937_64& rng) {
  Dataset d;
  d.count = 3 + rng() % 20;
  d.tokens_per_sample = 1 + rng() % 16;
  d.vocab_size = static_cast<int>(2 + rng() % 500);
  d.num_classes = static_cast<int>(2 + rng() % 500);
  d.token_ids = test::random_labels(rng, d.count * d.tokens_per_sample, d.vocab_size);
  d.labels = test::random_labels(rng, d.count * d.tokens_per_sample, d.num_classes);
  return d;
}

TEST(TokenDataValidate, AcceptsConsistentTokenData) {
  std::mt19937_64 rng(test::test_seed());
  for (int i = 0; i < 20; ++i) {
    const Dataset d = random_token_dataset(rng);
    EXPECT_TRUE(d.is_token_data());
    EXPECT_TRUE(d.is_classification());
    EXPECT_EQ(d.labels_per_sample(), d.tokens_per_sample);
    EXPECT_NO_THROW(validate_dataset(d, "tokens.bin"));
  }
}

TEST(TokenDataValidate, NamesTheBadIdOrLabelBySampleAndPosition) {
  std::mt19937_64 rng(test::test_seed());
  for (int i = 0; i < 40; ++i) {
    Dataset d = random_token_dataset(rng);
    const size_t t = d.tokens_per_sample;
    const size_t sample = rng() % d.count, position = rng() % t;
    const bool bad_id = rng() % 2 == 0, too_big = rng() % 2 == 0;
    const int limit = bad_id ? d.vocab_size : d.num_classes;
    const int32_t value = too_big ? limit + static_cast<int32_t>(rng() % 3) : -1 - static_cast<int32_t>(rng() % 3);
    (bad_id ? d.token_ids : d.labels)[sample * t + position] = value;
    const std::string what = bad_id ? "token id" : "label";
    const std::string place = "tokens.bin: bad " + what + " " + std::to_string(value) + " in sample " +
                              std::to_string(sample) + ", position " + std::to_string(position);
    const std::string why =
        too_big ? std::string(bad_id ? "not below vocab_size " : "not below num_classes ") + std::to_string(limit)
                : what + "s must be >= 0";
    SCOPED_TRACE(place);
    test::expect_data_error([&] { validate_dataset(d, "tokens.bin"); }, {place, why});
  }
}

TEST(TokenDataValidate, RefusesInconsistentShapes) {
  std::mt19937_64 rng(test::test_seed());
  // At least 2 positions per sample: with one, a label per sample is a
  // label per position, and the feature form's labels are not a mismatch.
  Dataset good = random_token_dataset(rng);
  while (good.tokens_per_sample < 2) good = random_token_dataset(rng);
  auto refused = [](Dataset d, std::initializer_list<std::string> needles) {
    test::expect_data_error([&] { validate_dataset(d, "tokens.bin"); }, needles);
  };
  Dataset short_ids = good;
  short_ids.token_ids.pop_back();
  refused(short_ids, {"tokens.bin: shape mismatch", "token ids"});
  Dataset one_label_each = good;  // the feature form's labels [count]
  one_label_each.labels.resize(good.count);
  refused(one_label_each,
          {"tokens.bin: count mismatch", std::to_string(good.count) + " labels", "one label per position"});
  Dataset no_labels = good;
  no_labels.labels.clear();
  refused(no_labels, {"tokens.bin: count mismatch", "0 labels"});
  Dataset no_length = good;
  no_length.tokens_per_sample = 0;
  refused(no_length, {"tokens.bin", "tokens_per_sample is 0"});
  Dataset no_vocabulary = good;
  no_vocabulary.vocab_size = 0;
  refused(no_vocabulary, {"tokens.bin", "vocab_size 0"});
  Dataset with_features = good;
  with_features.features = 2;
  with_features.x.assign(good.count * 2, 0.5f);
  refused(with_features, {"tokens.bin", "both features and token ids"});
  Dataset with_targets = good;
  with_targets.target_dim = 1;
  with_targets.targets.assign(good.count, 0.5f);
  refused(with_targets, {"tokens.bin", "regression targets"});
}

}  // namespace
}  // namespace ddp
