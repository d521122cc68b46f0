// test_utf8_repair.cpp: ill-formed UTF-8 replaced as Python's
// bytes.decode("utf-8", "replace") replaces it (trainer/tokenizer/
// utf8_repair.h): Unicode's examples of maximal subparts, each kind of
// ill-formed sequence, valid text untouched, and any bytes made valid.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "trainer/tokenizer/utf8_repair.h"
#include "support/test_support.h"
#include "tokenizer_test_support.h"

namespace ddp {
namespace {

const std::string kFffd(kReplacementUtf8);

std::string repaired(const std::string& bytes) { return repair_utf8(std::string(bytes)).text; }

TEST(Utf8Repair, ReplacesMaximalSubpartsAsTheUnicodeStandardsExample) {
  // Unicode 15, section 3.9, Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  // -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d (Python gives the same).
  const std::string in("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64");
  EXPECT_EQ(repaired(in), "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  EXPECT_EQ(repair_utf8(std::string(in)).replacements, 6u);
  EXPECT_EQ(repair_utf8(std::string(in)).first_bad_offset, 1u);
}

TEST(Utf8Repair, ReplacesEachKindOfIllFormedSequenceAsPythonDoes) {
  // Expected values are Python 3.11's b.decode("utf-8", "replace").
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"\x80", kFffd},                                            // a lone continuation byte
      {"\xC0\xAF", kFffd + kFffd},                                // C0: never a lead (overlong)
      {"\xE0\x80\xAF", kFffd + kFffd + kFffd},                    // E0 80: overlong, 80 out of range
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},                    // a surrogate
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},        // above U+10FFFF
      {"\xF5\x80", kFffd + kFffd},                                // F5: never a lead
      {"\xE2\x82", kFffd},                                        // cut short at the end: one
      {"\xF0\x9F\x98", kFffd},                                    // cut short at the end: one
      {"\xE2\x82x", kFffd + "x"},                                 // cut short by an ASCII byte
      {"\xE2\x28\xA1", kFffd + "(" + kFffd},                      // a bad continuation restarts there
      {"\xC3\xA9\xFF\xC3\xA9", "\xC3\xA9" + kFffd + "\xC3\xA9"},  // valid around it kept
      {"\xF0\x9F\x98\x80\xF0\x9F", "\xF0\x9F\x98\x80" + kFffd},   // an emoji, then a cut one
  };
  for (const Case& c : cases) EXPECT_EQ(repaired(c.in), c.out) << "input of " << c.in.size() << " bytes";
}

TEST(Utf8Repair, LeavesValidUtf8Untouched) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 50; ++i) {
    const std::string text = test::random_utf8(rng, 1 + rng() % 2000);
    EXPECT_EQ(first_invalid_utf8(text), text.size());
    const RepairedUtf8 r = repair_utf8(std::string(text));
    EXPECT_EQ(r.text, text);
    EXPECT_EQ(r.replacements, 0u);
  }
}

TEST(Utf8Repair, MakesAnyBytesValidAndIsIdempotent) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(1 + rng() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 4 == 0 ? 0x80 + rng() % 0x80 : rng() % 256);
    const RepairedUtf8 r = repair_utf8(std::string(bytes));
    EXPECT_EQ(first_invalid_utf8(r.text), r.text.size());
    EXPECT_EQ(repaired(r.text), r.text);
    EXPECT_EQ(r.replacements > 0, first_invalid_utf8(bytes) != bytes.size());
  }
}

}  // namespace
}  // namespace ddp
