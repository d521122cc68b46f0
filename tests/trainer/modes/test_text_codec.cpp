// test_text_codec.cpp: the prompt's ids and the sampled ids' bytes
// (text_codec.h) for each tokenizer: bytes are their own ids; GPT-2's are
// its BPE's, an empty prompt is <|endoftext|>, the bytes of the ids
// concatenate to the text, and a prompt that is not UTF-8 or a ranks file
// that is not r50k_base is refused in one line naming the flag.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "support/data_file_support.h"
#include "support/test_support.h"
#include "trainer/modes/text_codec.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "trainer/tokenizer/tokenizer_test_support.h"

namespace ddp {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TextCodec, BytesAreTheirOwnIds) {
  std::mt19937_64 rng(test::test_seed());
  std::string text(64, '\0');
  for (char& ch : text) ch = static_cast<char>(rng() % 256);
  const TextCodec codec("bytes", "");
  const std::vector<int32_t> ids = codec.encode(text, "--prompt");
  ASSERT_EQ(ids.size(), text.size());
  std::string back;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i], static_cast<unsigned char>(text[i]));
    back += codec.token_bytes(ids[i]);
  }
  EXPECT_EQ(back, text);
  EXPECT_EQ(TextCodec().name(), "bytes");
}

TEST(TextCodec, Gpt2IdsAreItsBpesAndTheirBytesConcatenateToTheText) {
  const std::string ranks = test::gpt2_ranks_path();
  if (ranks.empty())
    GTEST_SKIP() << "no r50k_base ranks file (launch/test.sh fetches it: launch/fetch_gpt2_ranks.sh data)";
  std::mt19937_64 rng(test::test_seed());
  const std::string text = "Hello world, caf\xc3\xa9 " + test::random_utf8(rng, 40);
  const TextCodec codec("gpt2", ranks);
  const Gpt2Tokenizer reference = Gpt2Tokenizer::from_ranks_file(ranks);
  const std::vector<int32_t> ids = codec.encode(text, "--prompt");
  const std::vector<uint32_t> want = reference.encode(text);
  ASSERT_EQ(ids.size(), want.size());
  std::string back;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(static_cast<uint32_t>(ids[i]), want[i]) << i;
    back += codec.token_bytes(ids[i]);
  }
  EXPECT_EQ(back, text);
  EXPECT_EQ(codec.encode("", "--prompt"), (std::vector<int32_t>{50256}));  // a new document
  EXPECT_EQ(codec.encode("Hello", "--prompt"), (std::vector<int32_t>{15496}));
  const std::string bad = error_of([&] { codec.encode("ab\xff", "--prompt"); });
  EXPECT_NE(bad.find("--prompt is not valid UTF-8 at byte 2"), std::string::npos) << bad;
}

TEST(TextCodec, ABadTokenizerOrRanksFileIsRefusedNamingIt) {
  EXPECT_NE(error_of([] { TextCodec("words", ""); }).find("tokenizer 'words' is not one of bytes, gpt2"),
            std::string::npos);
  const std::string path = test::write_temp("not_ranks.txt", test::text_bytes("not a ranks table\n"));
  const std::string what = error_of([&] { TextCodec("gpt2", path); });
  EXPECT_NE(what.find("--gpt2-ranks: the model's tokenizer is GPT-2's, and"), std::string::npos) << what;
  EXPECT_NE(what.find("launch/fetch_gpt2_ranks.sh"), std::string::npos) << what;
}

}  // namespace
}  // namespace ddp
