// test_token_files.cpp: the token-file readers (trainer/data/token_files.h):
// bytes, llm.c .bin shards and raw uint16 files, read from files written
// here with fresh random tokens, and every bad input refused in one line
// that names the file and the field (the header word, the byte length, the
// position of a token id).
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "trainer/io/data_error.h"
#include "trainer/data/token_files.h"
#include "support/data_file_support.h"
#include "support/test_support.h"

namespace ddp {
namespace {

using test::Bytes;

std::vector<uint16_t> random_tokens(std::mt19937_64& rng, size_t count, int vocab) {
  std::vector<uint16_t> tokens(count);
  for (uint16_t& t : tokens) t = static_cast<uint16_t>(rng() % static_cast<uint64_t>(vocab));
  return tokens;
}

Bytes u16_bytes(const std::vector<uint16_t>& tokens) {  // little-endian, as numpy's tofile on x86
  Bytes out;
  for (uint16_t t : tokens) {
    out.push_back(static_cast<uint8_t>(t & 0xff));
    out.push_back(static_cast<uint8_t>(t >> 8));
  }
  return out;
}

// An llm.c shard as dev/data/data_common.py's write_datafile lays it out.
Bytes llmc_bytes(const std::vector<uint16_t>& tokens, int32_t magic = kLlmcMagic, int32_t version = kLlmcVersion,
                 std::optional<int64_t> count = std::nullopt) {
  std::vector<int32_t> header(kLlmcHeaderInts, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count.value_or(static_cast<int64_t>(tokens.size())));
  Bytes out = test::le_bytes(header);
  const Bytes body = u16_bytes(tokens);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

TokenStream read(const std::string& name, const Bytes& bytes, TokenFormat format = TokenFormat::Auto) {
  return read_token_file(test::write_temp(name, bytes), format);
}

TEST(TokenFiles, ATextFileIsItsBytes) {
  std::mt19937_64 rng(test::test_seed());
  Bytes bytes(1 + rng() % 5000);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  bytes[0] = 'x';  // not the first byte of the llm.c magic, so auto reads bytes
  for (TokenFormat format : {TokenFormat::Auto, TokenFormat::Bytes}) {
    const TokenStream s = read("input.txt", bytes, format);
    EXPECT_EQ(s.encoding, TokenEncoding::Bytes);
    ASSERT_EQ(s.tokens.size(), bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(s.tokens[i], bytes[i]) << "byte " << i;
  }
  EXPECT_TRUE(read("empty.txt", {}).tokens.empty());
}

TEST(TokenFiles, AnLlmcShardIsDetectedByItsMagicAndRead) {
  std::mt19937_64 rng(test::test_seed());
  const std::vector<uint16_t> tokens = random_tokens(rng, rng() % 3000, kGpt2VocabSize);
  const TokenStream s = read("train.bin", llmc_bytes(tokens));
  EXPECT_EQ(s.encoding, TokenEncoding::Llmc);
  EXPECT_EQ(s.tokens, tokens);
  // Asked for as bytes, the same file is its bytes, header and all.
  EXPECT_EQ(read("train.bin", llmc_bytes(tokens), TokenFormat::Bytes).tokens.size(),
            kLlmcHeaderBytes + 2 * tokens.size());
}

TEST(TokenFiles, ARawUint16FileIsReadWhenAskedFor) {
  std::mt19937_64 rng(test::test_seed());
  const std::vector<uint16_t> tokens = random_tokens(rng, rng() % 3000, 65536);
  const TokenStream s = read("train.bin", u16_bytes(tokens), TokenFormat::RawU16);
  EXPECT_EQ(s.encoding, TokenEncoding::RawU16);
  EXPECT_EQ(s.tokens, tokens);
}

TEST(TokenFiles, AnLlmcHeaderOfAnotherVersionIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  const int32_t version = 2 + static_cast<int32_t>(rng() % 10);
  const std::string path = test::write_temp("v.bin", llmc_bytes(random_tokens(rng, 100, 50), kLlmcMagic, version));
  test::expect_data_error([&] { read_token_file(path, TokenFormat::Auto); },
                          {path + ": ", "version " + std::to_string(version), "header[1]", "version 1"});
}

TEST(TokenFiles, AnLlmcTokenCountThatDisagreesWithTheFileSizeIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  const size_t held = 1 + rng() % 500;
  const int64_t said = static_cast<int64_t>(held) + (rng() % 2 ? 1 + static_cast<int64_t>(rng() % 50) : -1);
  const std::string path =
      test::write_temp("count.bin", llmc_bytes(random_tokens(rng, held, 50), kLlmcMagic, kLlmcVersion, said));
  test::expect_data_error(
      [&] { read_token_file(path, TokenFormat::Auto); },
      {path + ": ", "token count " + std::to_string(said), "header[2]", std::to_string(held) + " tokens"});
  // A negative count (a corrupt header word) is the same disagreement.
  const std::string negative =
      test::write_temp("negative.bin", llmc_bytes(random_tokens(rng, held, 50), kLlmcMagic, kLlmcVersion, -7));
  test::expect_data_error([&] { read_token_file(negative, TokenFormat::Auto); }, {negative + ": ", "token count -7"});
}

TEST(TokenFiles, AnLlmcShardOfOddByteLengthIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  Bytes bytes = llmc_bytes(random_tokens(rng, 1 + rng() % 500, 50));
  bytes.push_back(static_cast<uint8_t>(rng()));
  const std::string path = test::write_temp("odd.bin", bytes);
  test::expect_data_error([&] { read_token_file(path, TokenFormat::Auto); },
                          {path + ": ", "odd byte length", std::to_string(bytes.size())});
}

TEST(TokenFiles, AnLlmcHeaderCutShortIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  Bytes bytes = llmc_bytes({});
  bytes.resize(4 + rng() % (kLlmcHeaderBytes - 4));  // the magic, and less than the rest of the header
  const std::string path = test::write_temp("short.bin", bytes);
  test::expect_data_error(
      [&] { read_token_file(path, TokenFormat::Auto); },
      {path + ": ", "header", std::to_string(bytes.size()) + " bytes", std::to_string(kLlmcHeaderBytes)});
}

TEST(TokenFiles, ARawUint16FileOfOddByteLengthIsRefused) {
  std::mt19937_64 rng(test::test_seed());
  Bytes bytes = u16_bytes(random_tokens(rng, rng() % 500, 50));
  bytes.push_back(static_cast<uint8_t>(rng()));
  const std::string path = test::write_temp("odd.u16", bytes);
  test::expect_data_error([&] { read_token_file(path, TokenFormat::RawU16); },
                          {path + ": ", "odd byte length " + std::to_string(bytes.size()), "uint16"});
}

// A file is sized against the memory it will take (its uint16 stream and
// its windows: 10 bytes per byte of text, 5 per byte of uint16 tokens)
// before it is read, so a multi-GB file that cannot be held is one
// line instead of a machine swapping. Each encoding just below and just above.
TEST(TokenFiles, AFileWhoseTokensCannotBeHeldIsRefusedBeforeItIsRead) {
  std::mt19937_64 rng(test::test_seed());
  const size_t n = 100 + rng() % 400;
  const std::string text = test::write_temp("big.txt", Bytes(n, 'x'));
  const std::string llmc = test::write_temp("big.bin", llmc_bytes(random_tokens(rng, n, 50)));
  const std::string raw = test::write_temp("big.u16", u16_bytes(random_tokens(rng, n, 50)));
  const size_t llmc_file_bytes = kLlmcHeaderBytes + 2 * n;
  EXPECT_EQ(read_token_file(text, TokenFormat::Auto, 10 * n).tokens.size(), n);
  test::expect_data_error([&] { read_token_file(text, TokenFormat::Auto, 10 * n - 1); },
                          {text + ": ", "byte tokens", "limit"});
  EXPECT_EQ(read_token_file(llmc, TokenFormat::Auto, 5 * llmc_file_bytes).tokens.size(), n);
  test::expect_data_error([&] { read_token_file(llmc, TokenFormat::Auto, 5 * llmc_file_bytes - 1); },
                          {llmc + ": ", "uint16 tokens", "limit"});
  EXPECT_EQ(read_token_file(raw, TokenFormat::RawU16, 10 * n).tokens.size(), n);
  test::expect_data_error([&] { read_token_file(raw, TokenFormat::RawU16, 10 * n - 1); },
                          {raw + ": ", "uint16 tokens", "limit"});
}

// raw-u16 would read the 1024-byte header as 512 tokens.
TEST(TokenFiles, AnLlmcShardReadAsRawUint16IsRefused) {
  std::mt19937_64 rng(test::test_seed());
  const std::string path = test::write_temp("train.bin", llmc_bytes(random_tokens(rng, 10, 50)));
  test::expect_data_error([&] { read_token_file(path, TokenFormat::RawU16); },
                          {path + ": ", "llm.c", "--token-format auto"});
}

TEST(TokenFiles, ATokenIdNotBelowTheVocabularyIsNamedByPosition) {
  std::mt19937_64 rng(test::test_seed());
  for (int i = 0; i < 20; ++i) {
    const int vocab = static_cast<int>(2 + rng() % 60000);
    TokenStream s;
    s.source = "train.bin";
    s.tokens = random_tokens(rng, 1 + rng() % 2000, vocab);
    EXPECT_NO_THROW(require_tokens_below(s, vocab, "--vocab-size " + std::to_string(vocab)));
    const size_t position = rng() % s.tokens.size();
    const int bad = vocab + static_cast<int>(rng() % static_cast<uint64_t>(65536 - vocab));
    s.tokens[position] = static_cast<uint16_t>(bad);
    SCOPED_TRACE("position " + std::to_string(position));
    test::expect_data_error([&] { require_tokens_below(s, vocab, "--vocab-size " + std::to_string(vocab)); },
                            {"train.bin: ", "token id " + std::to_string(bad), "position " + std::to_string(position),
                             "--vocab-size " + std::to_string(vocab)});
  }
}

TEST(TokenFiles, AnUnknownTokenFormatNamesTheFlag) {
  EXPECT_EQ(parse_token_format("auto"), TokenFormat::Auto);
  EXPECT_EQ(parse_token_format("bytes"), TokenFormat::Bytes);
  EXPECT_EQ(parse_token_format("raw-u16"), TokenFormat::RawU16);
  try {
    parse_token_format("u16");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--token-format: 'u16' is not one of auto, bytes, raw-u16"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ddp
