// utf8_repair.cpp: the well-formed UTF-8 byte sequences (Unicode 15, Table
// 3-7), applied one position at a time.
#include "trainer/tokenizer/utf8_repair.h"

#include <cstdint>

namespace ddp {
namespace {

// The length a lead byte announces (0: it cannot start a sequence) and the
// range its first continuation byte must be in (the later ones: 80-BF).
struct LeadByte {
  int length;
  uint8_t second_low;
  uint8_t second_high;
};

LeadByte lead_byte(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlongs
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  return {0, 0, 0};
}

// How many bytes from `i` form the next unit: a whole character (valid
// true) or the maximal subpart to replace by one U+FFFD (valid false).
size_t next_unit(std::string_view bytes, size_t i, bool& valid) {
  const auto b = static_cast<uint8_t>(bytes[i]);
  const LeadByte lead = lead_byte(b);
  valid = false;
  if (lead.length == 0) return 1;
  for (int k = 1; k < lead.length; ++k) {
    if (i + k >= bytes.size()) return bytes.size() - i;  // cut short at the end
    const auto c = static_cast<uint8_t>(bytes[i + k]);
    const uint8_t low = k == 1 ? lead.second_low : 0x80;
    const uint8_t high = k == 1 ? lead.second_high : 0xBF;
    if (c < low || c > high) return k;
  }
  valid = true;
  return lead.length;
}

}  // namespace

size_t first_invalid_utf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {  // ASCII runs dominate text: skip them first
      ++i;
      continue;
    }
    bool valid = false;
    const size_t n = next_unit(bytes, i, valid);
    if (!valid) return i;
    i += n;
  }
  return bytes.size();
}

RepairedUtf8 repair_utf8(std::string&& bytes) {
  RepairedUtf8 out;
  const size_t first_bad = first_invalid_utf8(bytes);
  if (first_bad == bytes.size()) {
    out.text = std::move(bytes);
    return out;
  }
  out.first_bad_offset = first_bad;
  out.text.reserve(bytes.size() + bytes.size() / 8);
  out.text.append(bytes, 0, first_bad);
  size_t i = first_bad;
  while (i < bytes.size()) {
    bool valid = false;
    const size_t n = next_unit(bytes, i, valid);
    if (valid) {
      out.text.append(bytes, i, n);
    } else {
      out.text += kReplacementUtf8;
      ++out.replacements;
    }
    i += n;
  }
  return out;
}

}  // namespace ddp
