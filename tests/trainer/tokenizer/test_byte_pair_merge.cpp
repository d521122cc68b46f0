// test_byte_pair_merge.cpp: rank-ordered merges (trainer/tokenizer/
// byte_pair_merge.h) on small hand-made tables, where the order of merges
// decides the ids, and against a plain transcription of the rule on random
// tables and pieces.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "trainer/tokenizer/bpe_ranks.h"
#include "trainer/tokenizer/byte_pair_merge.h"
#include "support/test_support.h"
#include "tokenizer_test_support.h"

namespace ddp {
namespace {

std::vector<uint32_t> encode_piece(const BpeRanks& ranks, const std::string& piece) {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> scratch;
  byte_pair_encode(ranks, piece, ids, scratch);
  return ids;
}

// The rule as written: the whole piece if it is a token; else, from single
// bytes, merge the adjacent pair whose concatenation has the lowest rank
// (the leftmost on a tie) until no pair is a token.
std::vector<uint32_t> reference_encode(const BpeRanks& ranks, const std::string& piece) {
  if (ranks.rank_of(piece) != kNoRank) return {ranks.rank_of(piece)};
  std::vector<std::string> parts;
  for (char c : piece) parts.push_back(std::string(1, c));
  for (;;) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const uint32_t r = ranks.rank_of(parts[i] + parts[i + 1]);
      if (r < best) {
        best = r;
        at = i;
      }
    }
    if (best == kNoRank) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<uint32_t> ids;
  for (const std::string& p : parts) ids.push_back(ranks.rank_of(p));
  return ids;
}

TEST(BytePairMerge, TheLowestRankedPairMergesFirst) {
  // "bc" ranks below "ab": "abc" is a + bc; swapped, ab + c.
  const BpeRanks bc_first = test::table_of({"bc", "ab"});
  EXPECT_EQ(encode_piece(bc_first, "abc"), (std::vector<uint32_t>{'a', 256}));
  const BpeRanks ab_first = test::table_of({"ab", "bc"});
  EXPECT_EQ(encode_piece(ab_first, "abc"), (std::vector<uint32_t>{256, 'c'}));
}

TEST(BytePairMerge, MergesBuildOnEarlierMerges) {
  // ab, then cd, then ab+cd: "abcd" one token only through both merges.
  const BpeRanks t = test::table_of({"ab", "cd", "abcd", "abcde"});
  EXPECT_EQ(encode_piece(t, "abcdx"), (std::vector<uint32_t>{258, 'x'}));
  EXPECT_EQ(encode_piece(t, "xabcd"), (std::vector<uint32_t>{'x', 258}));
  // "abcde" is a token: a whole piece is looked up first, as tiktoken does.
  EXPECT_EQ(encode_piece(t, "abcde"), (std::vector<uint32_t>{259}));
  // "bcd": no "ab" to start from, so c+d merges and b stays alone.
  EXPECT_EQ(encode_piece(t, "bcd"), (std::vector<uint32_t>{'b', 257}));
}

TEST(BytePairMerge, TheLeftmostOfEqualPairsMergesFirst) {
  const BpeRanks t = test::table_of({"aa"});
  EXPECT_EQ(encode_piece(t, "aaa"), (std::vector<uint32_t>{256, 'a'}));
  EXPECT_EQ(encode_piece(t, "aaaaa"), (std::vector<uint32_t>{256, 256, 'a'}));
}

TEST(BytePairMerge, SingleBytesAreTheirOwnRanks) {
  const BpeRanks t = test::table_of({"ab"});
  EXPECT_EQ(encode_piece(t, std::string("\xff\x00\x80", 3)), (std::vector<uint32_t>{0xFF, 0x00, 0x80}));
}

TEST(BytePairMerge, EqualsTheRuleAsWrittenOnRandomTables) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int table = 0; table < 20; ++table) {
    // Merges of tokens already in the table, over a 4-letter alphabet, so
    // random pieces meet many of them in competing orders.
    std::vector<std::string> tokens = {"a", "b", "c", "d"};
    std::vector<std::string> merges;
    for (int m = 0; m < 60; ++m) {
      const std::string t = tokens[rng() % tokens.size()] + tokens[rng() % tokens.size()];
      bool seen = false;
      for (const std::string& x : tokens) seen = seen || x == t;
      if (seen) continue;
      tokens.push_back(t);
      merges.push_back(t);
    }
    const BpeRanks ranks = test::table_of(merges);
    for (int p = 0; p < 200; ++p) {
      std::string piece(1 + rng() % 24, 'a');
      for (char& c : piece) c = static_cast<char>('a' + rng() % 4);
      ASSERT_EQ(encode_piece(ranks, piece), reference_encode(ranks, piece)) << "piece " << piece;
    }
  }
}

}  // namespace
}  // namespace ddp
