// test_rank_agreement.cpp: the start-up agreement's verdict from gathered
// records (trainer/config/rank_agreement.h): equal records agree; one
// setting that differs on some ranks is named with those ranks and rank 0's
// value; another build (other settings) is named as such.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "support/test_support.h"
#include "trainer/config/rank_agreement.h"

namespace ddp {
namespace {

std::vector<Setting> some_settings(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Setting> out;
  for (int i = 0; i < 40; ++i) out.push_back({"--flag" + std::to_string(i), std::to_string(rng() % 1000)});
  return out;
}

std::vector<uint64_t> gather(const std::vector<std::vector<Setting>>& ranks) {
  std::vector<uint64_t> out;
  for (const auto& settings : ranks) {
    const std::vector<uint64_t> record = agreement_record(settings);
    out.insert(out.end(), record.begin(), record.end());
  }
  return out;
}

TEST(RankAgreement, EqualSettingsAgree) {
  const auto settings = some_settings(test::test_seed());
  EXPECT_EQ(find_disagreement(settings, gather({settings, settings, settings}), 3), "");
}

TEST(RankAgreement, NamesTheFirstSettingThatDiffersAndEveryRankThatDiffers) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto base = some_settings(seed);
  const size_t which = std::mt19937_64(seed + 1)() % base.size();
  auto other = base;
  other[which].value += "0";
  const std::string line = find_disagreement(base, gather({base, other, base, other}), 4);
  EXPECT_EQ(line, "the ranks disagree on " + base[which].name + ": ranks 1, 3 differ from rank 0's " +
                      base[which].value +
                      " (every rank must be started with the same flags, config file and data)");
  EXPECT_NE(find_disagreement(base, gather({base, base, other}), 3).find(": rank 2 differs from"), std::string::npos);
}

TEST(RankAgreement, AValueNeverMatchesAnotherSettingsValue) {
  // Two settings swapped between ranks: each digest covers its name too.
  std::vector<Setting> a = {{"--x", "1"}, {"--y", "2"}}, b = {{"--x", "2"}, {"--y", "1"}};
  EXPECT_NE(find_disagreement(a, gather({a, b}), 2), "");
}

TEST(RankAgreement, OtherSettingsAreAnotherBuild) {
  auto base = some_settings(test::test_seed());
  auto fewer = base;
  fewer.pop_back();
  auto renamed = base;
  renamed[3].name = "--renamed";
  for (const auto& other : {fewer, renamed}) {
    const std::string line = find_disagreement(base, gather({base, other}), 2);
    EXPECT_NE(line.find("different builds of ddp_train: rank 1 knows"), std::string::npos) << line;
  }
}

TEST(RankAgreement, ALongValueIsCutAndTooManySettingsAreRefused) {
  std::vector<Setting> a = {{"--train-text (what it holds)", std::string(500, 'x')}}, b = {{a[0].name, "y"}};
  const std::string line = find_disagreement(a, gather({a, b}), 2);
  EXPECT_NE(line.find(std::string(120, 'x') + "..."), std::string::npos) << line;
  EXPECT_LT(line.size(), 300u);
  EXPECT_THROW(agreement_record(std::vector<Setting>(kMaxSettings + 1, {"--x", "1"})), Error);
}

}  // namespace
}  // namespace ddp
