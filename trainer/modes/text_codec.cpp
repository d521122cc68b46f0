// text_codec.cpp
#include "trainer/modes/text_codec.h"

#include "kernels/error.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "trainer/tokenizer/tokenizer_kind.h"
#include "trainer/tokenizer/utf8_repair.h"

namespace ddp {

TextCodec::TextCodec(const std::string& tokenizer, const std::string& gpt2_ranks_path) : name_(tokenizer) {
  check_tokenizer_name(tokenizer, "the model");
  if (tokenizer != kGpt2Tokenizer) return;
  try {
    gpt2_ = std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::from_ranks_file(gpt2_ranks_path));
  } catch (const Error& e) {
    throw Error(std::string("--gpt2-ranks: the model's tokenizer is GPT-2's, and ") + e.what() +
                " (launch/fetch_gpt2_ranks.sh DIR fetches the table to DIR/gpt2.tiktoken)");
  }
}

TextCodec::TextCodec() : name_(kBytesTokenizer) {}
TextCodec::~TextCodec() = default;
TextCodec::TextCodec(TextCodec&&) noexcept = default;
TextCodec& TextCodec::operator=(TextCodec&&) noexcept = default;

std::vector<int32_t> TextCodec::encode(const std::string& text, const std::string& flag) const {
  std::vector<int32_t> ids;
  if (gpt2_ == nullptr) {
    for (const char ch : text) ids.push_back(static_cast<unsigned char>(ch));
    return ids;
  }
  if (text.empty()) return {static_cast<int32_t>(gpt2_->end_of_text())};
  // A file's invalid bytes are replaced as GPT-2's encoder.py reads text
  // (ddp_tokenize); a prompt is typed, so a bad byte is more likely a wrong
  // locale or a cut argument than meant, and is refused instead.
  const size_t bad = first_invalid_utf8(text);
  if (bad < text.size())
    throw Error(flag + " is not valid UTF-8 at byte " + std::to_string(bad) +
                " (counted from 0), and GPT-2's tokenizer reads text");
  for (const uint32_t id : gpt2_->encode(text)) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

std::string TextCodec::token_bytes(int32_t id) const {
  if (gpt2_ == nullptr) return std::string(1, static_cast<char>(id));
  return gpt2_->decode({static_cast<uint32_t>(id)});
}

}  // namespace ddp
