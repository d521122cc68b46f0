// tokenizer_test_support.h: what the tokenizer suites share: ranks tables
// built in memory (tiktoken's file format), random UTF-8 text, and the real
// r50k_base ranks file where the test command fetched it.
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trainer/tokenizer/bpe_ranks.h"

namespace ddp::test {

inline std::string base64(const std::string& bytes) {
  static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t bits = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) bits |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) bits |= static_cast<uint8_t>(bytes[i + 2]);
    out += kDigits[(bits >> 18) & 63];
    out += kDigits[(bits >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(bits >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[bits & 63] : '=';
  }
  return out;
}

// A ranks file: token i has rank i.
inline std::vector<uint8_t> ranks_file(const std::vector<std::string>& tokens) {
  std::string text;
  for (size_t r = 0; r < tokens.size(); ++r) text += base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return std::vector<uint8_t>(text.begin(), text.end());
}

// The 256 single bytes (ranks 0..255, byte order), then `merges` in order.
inline std::vector<std::string> byte_tokens_then(const std::vector<std::string>& merges) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.insert(tokens.end(), merges.begin(), merges.end());
  return tokens;
}

inline BpeRanks table_of(const std::vector<std::string>& merges) {
  return BpeRanks::parse(ranks_file(byte_tokens_then(merges)), "test table");
}

inline void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 63));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 63));
    s += static_cast<char>(0x80 | (cp & 63));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 63));
    s += static_cast<char>(0x80 | ((cp >> 6) & 63));
    s += static_cast<char>(0x80 | (cp & 63));
  }
}

// Valid UTF-8 of `chars` code points, weighted to what the pre-tokenizer
// cuts on: ASCII letters, digits, spaces, newlines, apostrophes, symbols,
// then any scalar value (no surrogates) of every plane.
inline std::string random_utf8(std::mt19937_64& rng, size_t chars) {
  static const std::string kAscii = "aaaaabcdeSsTtlmrvdx0123456789     \n\n\t\r''.,!?-";
  std::string s;
  for (size_t i = 0; i < chars; ++i) {
    const uint64_t r = rng() % 10;
    if (r < 6) {
      s += kAscii[rng() % kAscii.size()];
      continue;
    }
    uint32_t cp = 0;
    if (r < 8) {
      static const uint32_t kSpaces[] = {0xA0, 0x85, 0x3000, 0x2028, 0x180E, 0x200B, 0x1680, 0x2009};
      cp = r == 6 ? kSpaces[rng() % 8] : 0x80 + static_cast<uint32_t>(rng() % 0x780);
    } else {
      do cp = static_cast<uint32_t>(rng() % 0x110000);
      while (cp >= 0xD800 && cp <= 0xDFFF);
    }
    append_utf8(s, cp);
  }
  return s;
}

// The r50k_base file launch/test.sh fetches (tests/CMakeLists.txt passes its
// path), or "" where it is absent (those tests then skip, saying why).
inline std::string gpt2_ranks_path() {
#ifdef DDP_GPT2_RANKS_FILE
  std::ifstream probe(DDP_GPT2_RANKS_FILE);
  if (probe) return DDP_GPT2_RANKS_FILE;
#endif
  return "";
}

}  // namespace ddp::test
