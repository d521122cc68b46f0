// test_training_sampler.cpp: the line a --sample-every sample is printed
// as (training_sampler.h: escaped_bytes): one line of printable ASCII for
// any bytes, from which the bytes come back exactly.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "support/escaped_text_support.h"
#include "support/test_support.h"
#include "trainer/modes/training_sampler.h"

namespace ddp {
namespace {

TEST(TrainingSampler, EscapedBytesAreOnePrintableLineThatDecodesToTheBytes) {
  EXPECT_EQ(escaped_bytes("ROMEO:\nO\tshe\\is \r"), "ROMEO:\\nO\\tshe\\\\is \\r");
  EXPECT_EQ(escaped_bytes(std::string("\0\x7f\x80\xff", 4)), "\\x00\\x7f\\x80\\xff");
  std::mt19937_64 rng(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  for (int i = 0; i < 300; ++i) every_byte += static_cast<char>(rng());
  const std::string line = escaped_bytes(every_byte);
  for (const char ch : line) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << "byte " << int(static_cast<unsigned char>(ch));
  EXPECT_EQ(test::unescaped(line), every_byte);
}

}  // namespace
}  // namespace ddp
