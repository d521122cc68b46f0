// test_gpt2_tokenizer.cpp: the encoder and decoder (trainer/tokenizer/
// gpt2_tokenizer.h) on a small hand-made table: decode(encode(x)) == x for
// valid UTF-8, the same ids at any thread count and chunk size, invalid
// input refused; and on the real r50k_base file where the test command
// fetched it: known ids, and other tables refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/error.h"
#include "trainer/io/data_error.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "tokenizer_test_support.h"

namespace ddp {
namespace {

// A few merges of English and of UTF-8 lead/continuation bytes.
Gpt2Tokenizer small_tokenizer() {
  return Gpt2Tokenizer(test::table_of({" t", "he", " a", "in", " the", "er", "\xC3\xA9", "  ", "\n\n", "'s"}));
}

TEST(Gpt2Tokenizer, DecodeOfEncodeGivesBackValidUtf8) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Gpt2Tokenizer tok = small_tokenizer();
  for (int i = 0; i < 50; ++i) {
    const std::string text = test::random_utf8(rng, rng() % 3000);
    const std::vector<uint32_t> ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_LE(ids.size(), text.size());
  }
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(Gpt2Tokenizer, MergesInsidePiecesOnly) {
  const Gpt2Tokenizer tok = small_tokenizer();
  // " the" is one token; "he" merges inside "hehe"; "'s" is a contraction
  // piece, "'S" is not (the pattern is case-sensitive).
  EXPECT_EQ(tok.encode(" the"), (std::vector<uint32_t>{260}));
  EXPECT_EQ(tok.encode("hehe"), (std::vector<uint32_t>{257, 257}));
  EXPECT_EQ(tok.encode("it's"), (std::vector<uint32_t>{'i', 't', 265}));
  EXPECT_EQ(tok.encode("it'S"), (std::vector<uint32_t>{'i', 't', '\'', 'S'}));
}

TEST(Gpt2Tokenizer, TheSameIdsAtAnyThreadCountAndChunkSize) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Gpt2Tokenizer tok = small_tokenizer();
  const std::string text = test::random_utf8(rng, 200000);
  const std::vector<uint32_t> one = tok.encode(text, 1, size_t{1} << 30);  // one chunk, one thread
  for (const int threads : {1, 2, 4, 7})
    for (const size_t chunk : {size_t{1}, size_t{13}, size_t{4096}}) {
      size_t last_progress = 0;
      const std::vector<uint32_t> ids = tok.encode(text, threads, chunk, [&](size_t done) { last_progress = done; });
      EXPECT_EQ(ids, one) << threads << " threads, chunks of " << chunk;
      EXPECT_EQ(last_progress, text.size());
    }
}

TEST(Gpt2Tokenizer, EndOfTextInTheTextIsOrdinaryText) {
  const Gpt2Tokenizer tok = small_tokenizer();
  EXPECT_EQ(tok.end_of_text(), 266u);  // the id after the last rank
  const std::vector<uint32_t> ids = tok.encode("<|endoftext|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.end_of_text()), 0);
  EXPECT_EQ(tok.decode(ids), "<|endoftext|>");
  EXPECT_EQ(tok.decode({tok.end_of_text()}), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, RefusesInvalidUtf8AndIdsBeyondTheVocabulary) {
  const Gpt2Tokenizer tok = small_tokenizer();
  try {
    tok.encode("ok \xFF no");
    FAIL() << "invalid UTF-8 was encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 at byte 3"), std::string::npos) << e.what();
  }
  try {
    tok.decode({1, 2, 267});
    FAIL() << "an id beyond the vocabulary was decoded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 267 at position 2 is not below the vocabulary 267"),
              std::string::npos)
        << e.what();
  }
}

TEST(Gpt2Tokenizer, LongRunsOfOnePieceKind) {
  // A long word, a long run of spaces, of newlines, of symbols: one piece
  // each (no safe cut), matched without running out of PCRE2's stack. The
  // merge loop is quadratic in a piece's length where the piece keeps
  // merging (as tiktoken's), so the runs that merge ("  ", "\n\n") are kept
  // short here and the 2 MB ones are split alone.
  const Gpt2Tokenizer tok = small_tokenizer();
  for (const std::string& text :
       {std::string(2000000, 'x'), std::string(3000, ' ') + "x", std::string(3000, '\n'), std::string(300000, '!')})
    EXPECT_EQ(tok.decode(tok.encode(text, 2)), text);
  for (const std::string& text : {std::string(2000000, ' ') + "x", std::string(2000000, '\n')}) {
    std::vector<PieceSpan> pieces;
    tok.pretokenizer().split(text, pieces);
    EXPECT_EQ(pieces.size(), text.back() == 'x' ? 2u : 1u);
  }
}

TEST(Gpt2Tokenizer, RealRanksGiveGpt2sIds) {
  const std::string path = test::gpt2_ranks_path();
  if (path.empty())
    GTEST_SKIP() << "no r50k_base ranks file (launch/test.sh fetches it: launch/fetch_gpt2_ranks.sh data)";
  const Gpt2Tokenizer tok = Gpt2Tokenizer::from_ranks_file(path);
  EXPECT_EQ(tok.vocab_size(), 50257u);
  EXPECT_EQ(tok.end_of_text(), kGpt2EndOfText);
  // tiktoken.get_encoding("gpt2").encode_ordinary(...), the ids every GPT-2 user knows.
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<uint32_t>{15496, 995}));
  EXPECT_EQ(tok.encode("It's 2026, isn't it?"), (std::vector<uint32_t>{1026, 338, 1160, 2075, 11, 2125, 470, 340, 30}));
  EXPECT_EQ(tok.encode("<|endoftext|>"), (std::vector<uint32_t>{27, 91, 437, 1659, 5239, 91, 29}));
}

TEST(Gpt2Tokenizer, RefusesATableThatIsNotR50kBase) {
  const std::string path = test::gpt2_ranks_path();
  if (path.empty())
    GTEST_SKIP() << "no r50k_base ranks file (launch/test.sh fetches it: launch/fetch_gpt2_ranks.sh data)";
  std::ifstream in(path, std::ios::binary);
  std::string real((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  test::TempDir dir("gpt2_tokenizer");
  const auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string p = dir.path() + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  };
  // Two merges' ranks swapped: well-formed, but another tokenizer.
  std::string swapped = real;
  const size_t a = swapped.find(" 50254\n");
  const size_t b = swapped.find(" 50255\n");
  swapped.replace(b, 7, " 50254\n");
  swapped.replace(a, 7, " 50255\n");
  for (const auto& [name, bytes, expect] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"swapped.tiktoken", swapped, "not GPT-2's r50k_base (sha256 " + std::string(kR50kBaseSha256) + ")"},
           {"text.txt", "The quick brown fox\n", "line 1 is not \"<base64 token> <rank>\""},
           {"empty.tiktoken", "", "is empty"}}) {
    try {
      Gpt2Tokenizer::from_ranks_file(write(name, bytes));
      ADD_FAILURE() << name << " was accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ddp
