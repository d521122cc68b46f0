// test_llmc_token_writer.cpp: the llm.c shard writer (trainer/data/
// llmc_token_writer.h): random tokens written and read back by the reader
// ddp_train uses (token_files.h), the header word by word, ids that do not
// fit refused, and the file written whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "trainer/data/llmc_token_writer.h"
#include "trainer/data/token_files.h"
#include "support/temp_dir.h"
#include "support/test_support.h"

namespace ddp {
namespace {

int32_t header_word(const std::vector<uint8_t>& bytes, size_t i) {
  const uint8_t* p = bytes.data() + 4 * i;
  return static_cast<int32_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

TEST(LlmcTokenWriter, WritesWhatTheReaderReadsBack) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> tokens(1 + rng() % 5000);
  for (uint32_t& t : tokens) t = static_cast<uint32_t>(rng() % 65536);
  tokens[0] = 50256;
  const std::vector<uint8_t> bytes = llmc_shard_bytes(tokens);
  ASSERT_EQ(bytes.size(), kLlmcHeaderBytes + 2 * tokens.size());
  EXPECT_EQ(header_word(bytes, 0), kLlmcMagic);
  EXPECT_EQ(header_word(bytes, 1), kLlmcVersion);
  EXPECT_EQ(header_word(bytes, 2), static_cast<int32_t>(tokens.size()));
  for (size_t i = 3; i < kLlmcHeaderInts; ++i) EXPECT_EQ(header_word(bytes, i), 0) << "header[" << i << "]";
  EXPECT_EQ(bytes[kLlmcHeaderBytes], 50256 & 0xFF);  // little-endian
  EXPECT_EQ(bytes[kLlmcHeaderBytes + 1], 50256 >> 8);

  test::TempDir dir("llmc_writer");
  const std::string path = dir.path() + "/out.bin";
  write_llmc_shard(path, tokens);
  const TokenStream read = read_token_file(path, TokenFormat::Auto);
  EXPECT_EQ(read.encoding, TokenEncoding::Llmc);
  ASSERT_EQ(read.tokens.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(read.tokens[i], tokens[i]) << "token " << i;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u) << "a temporary file was left beside the shard";
}

TEST(LlmcTokenWriter, RefusesAnIdThatDoesNotFitUint16) {
  try {
    llmc_shard_bytes({1, 2, 65535, 65536});
    FAIL() << "id 65536 was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 65536 at position 3 does not fit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp
