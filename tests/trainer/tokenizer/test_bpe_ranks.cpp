// test_bpe_ranks.cpp: the ranks table (trainer/tokenizer/bpe_ranks.h): a
// table read back token for token, and every malformed file refused in one
// line that names the problem (and the line); the sha256 pin (sha256.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trainer/io/data_error.h"
#include "trainer/tokenizer/bpe_ranks.h"
#include "trainer/tokenizer/sha256.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "tokenizer_test_support.h"

namespace ddp {
namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// The one-line message parse() throws for `file`, or "" when it parses.
std::string refusal(const std::vector<uint8_t>& file) {
  try {
    BpeRanks::parse(file, "t.tiktoken");
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what;
  }
  return "";
}

std::string table_text(const std::vector<std::string>& merges) {
  const std::vector<uint8_t> f = test::ranks_file(test::byte_tokens_then(merges));
  return std::string(f.begin(), f.end());
}

TEST(BpeRanks, ReadsEveryTokenBackByRank) {
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  std::vector<std::string> merges;
  while (merges.size() < 500) {
    std::string t(2 + rng() % 9, '\0');
    for (char& c : t) c = static_cast<char>(rng() % 256);
    bool seen = false;
    for (const std::string& m : merges) seen = seen || m == t;
    if (!seen) merges.push_back(t);
  }
  // Lines in a shuffled order: ranks are read, not positions.
  const std::vector<std::string> tokens = test::byte_tokens_then(merges);
  std::vector<size_t> order(tokens.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::string text;
  for (size_t r : order) text += test::base64(tokens[r]) + " " + std::to_string(r) + "\n";
  const BpeRanks table = BpeRanks::parse(bytes_of(text), "shuffled");
  ASSERT_EQ(table.size(), tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    EXPECT_EQ(table.rank_of(tokens[r]), r);
    EXPECT_EQ(table.token_bytes(static_cast<uint32_t>(r)), tokens[r]);
  }
  EXPECT_EQ(table.rank_of(std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12)), kNoRank);
}

TEST(BpeRanks, RefusesAnEmptyFile) { EXPECT_NE(refusal({}).find("t.tiktoken: is empty"), std::string::npos); }

TEST(BpeRanks, RefusesALineThatIsNotBase64SpaceRankNamingIt) {
  const std::string good = table_text({"ab"});
  for (const char* bad : {"YWI=", "YWI= ", " 3", "YWI= x", "YWI= -1", "YWI=  3", "YW!= 257", "YWI 257", "YWJ= 257",
                          "YWI= 99999999999", "YWI=\t257", "", "YWI= 257 "}) {
    const std::string msg = refusal(bytes_of(good + std::string(bad) + "\n"));
    EXPECT_NE(msg.find("line 258 is not \"<base64 token> <rank>\""), std::string::npos) << "'" << bad << "': " << msg;
  }
  EXPECT_NE(refusal(bytes_of("hello world\n")).find("line 1 is not"), std::string::npos);
}

TEST(BpeRanks, RefusesARankGivenTwice) {
  const std::string msg = refusal(bytes_of(table_text({"ab"}) + test::base64("cd") + " 256\n"));
  EXPECT_NE(msg.find("line 258 gives rank 256, already given on line 257"), std::string::npos) << msg;
}

TEST(BpeRanks, RefusesATokenGivenTwice) {
  const std::string msg = refusal(bytes_of(table_text({"ab"}) + test::base64("ab") + " 257\n"));
  EXPECT_NE(msg.find("line 258 gives a token that line 257 already ranks"), std::string::npos) << msg;
}

TEST(BpeRanks, RefusesRanksWithAGap) {
  const std::string msg = refusal(bytes_of(table_text({"ab"}) + test::base64("cd") + " 258\n"));
  EXPECT_NE(msg.find("ranks are not contiguous: rank 257 is missing"), std::string::npos) << msg;
}

TEST(BpeRanks, RefusesATableMissingASingleByte) {
  std::vector<std::string> tokens = test::byte_tokens_then({"ab"});
  tokens[0x7F] = "xyz";  // byte 0x7F gone, the ranks still 0..n-1
  const std::string msg = refusal(test::ranks_file(tokens));
  EXPECT_NE(msg.find("the single byte 0x7F has no rank"), std::string::npos) << msg;
}

TEST(Sha256, MatchesTheStandardsTestVectors) {
  EXPECT_EQ(sha256_hex(bytes_of("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(BpeRanks, LoadRefusesAWellFormedTableWithAnotherHash) {
  test::TempDir dir("bpe_ranks");
  const std::string path = dir.path() + "/small.tiktoken";
  const std::vector<uint8_t> file = test::ranks_file(test::byte_tokens_then({"ab", "abc"}));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), file.size());
  EXPECT_EQ(load_bpe_ranks(path).size(), 258u);  // no pin asked for: any table
  EXPECT_EQ(load_bpe_ranks(path, sha256_hex(file), "itself").size(), 258u);
  try {
    load_bpe_ranks(path, kR50kBaseSha256, "GPT-2's r50k_base");
    FAIL() << "a table with another sha256 was accepted";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a ranks table of 258 tokens with sha256 " + sha256_hex(file) + ", not GPT-2's r50k_base"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace ddp
