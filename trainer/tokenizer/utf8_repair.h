// utf8_repair.h: bytes made valid UTF-8 the way Python makes them:
// bytes.decode("utf-8", errors="replace"). tiktoken (and GPT-2's encoder.py)
// tokenize a Python str, so a file is decoded first; with errors="replace"
// every ill-formed sequence becomes U+FFFD. The rule is Unicode's
// "substitution of maximal subparts" (Unicode 15, section 3.9, U+FFFD
// Substitution of Maximal Subparts), which CPython's decoder follows: a byte
// that cannot start a sequence (0x80-0xC1, 0xF5-0xFF) is one U+FFFD; a
// valid start followed by fewer continuation bytes than it needs (a byte
// out of the next position's range, or the end of the input) is one U+FFFD
// for the start and the continuation bytes that were valid, and decoding
// resumes at the byte that broke it. Surrogates (ED A0-BF ..), overlongs (E0
// 80-9F .., F0 80-8F .., C0, C1) and code points above U+10FFFF (F4 90-BF
// .., F5-FF) are ill-formed by the same table.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ddp {

// The UTF-8 encoding of U+FFFD.
constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

struct RepairedUtf8 {
  std::string text;             // valid UTF-8
  size_t replacements = 0;      // U+FFFD inserted
  size_t first_bad_offset = 0;  // the byte offset of the first ill-formed sequence (when replacements > 0)
};

// The offset of the first ill-formed sequence in `bytes`, or bytes.size()
// when they are valid UTF-8.
size_t first_invalid_utf8(std::string_view bytes);

// `bytes` with every ill-formed sequence replaced as above; valid input is
// moved through unchanged (no copy).
RepairedUtf8 repair_utf8(std::string&& bytes);

}  // namespace ddp
