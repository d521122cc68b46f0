// text_chunks.cpp: the cut rule of text_chunks.h, scanned forward.
#include "trainer/tokenizer/text_chunks.h"

namespace ddp {
namespace {

bool is_ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

bool is_safe_cut(std::string_view text, size_t p) {
  if (p == 0 || p >= text.size()) return false;
  const auto before = static_cast<unsigned char>(text[p - 1]);
  const auto at = static_cast<unsigned char>(text[p]);
  return before < 0x80 && !is_ascii_space(before) && is_ascii_space(at);
}

std::vector<size_t> chunk_boundaries(std::string_view text, size_t target_bytes) {
  std::vector<size_t> cuts{0};
  size_t p = target_bytes;
  while (p < text.size()) {
    while (p < text.size() && !is_safe_cut(text, p)) ++p;
    if (p >= text.size()) break;
    cuts.push_back(p);
    p += target_bytes;
  }
  cuts.push_back(text.size());
  return cuts;
}

}  // namespace ddp
