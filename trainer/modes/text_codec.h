// text_codec.h: a language model's prompt to ids and its ids back to bytes,
// with the model's tokenizer (tokenizer/tokenizer_kind.h), for --generate and
// --sample-every. Bytes need no file; GPT-2's BPE reads its r50k_base ranks
// (--gpt2-ranks, launch/fetch_gpt2_ranks.sh fetches them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

class Gpt2Tokenizer;

class TextCodec {
 public:
  // `tokenizer` a known name; `gpt2_ranks_path` read (and its hash checked)
  // only for gpt2. Throws one line for an unknown name or a bad ranks file.
  TextCodec(const std::string& tokenizer, const std::string& gpt2_ranks_path);
  TextCodec();  // bytes
  ~TextCodec();
  TextCodec(TextCodec&&) noexcept;
  TextCodec& operator=(TextCodec&&) noexcept;

  const std::string& name() const { return name_; }

  // The prompt's ids. Bytes: each byte. GPT-2: the BPE ids of the text, which
  // must be valid UTF-8 (one line naming `flag` and the offset otherwise);
  // an empty text is GPT-2's start of a document, <|endoftext|>.
  std::vector<int32_t> encode(const std::string& text, const std::string& flag) const;

  // The bytes of one id (a GPT-2 token may be part of a UTF-8 character:
  // the bytes of consecutive ids concatenate to the text).
  std::string token_bytes(int32_t id) const;

 private:
  std::string name_;
  std::unique_ptr<Gpt2Tokenizer> gpt2_;  // null for bytes
};

}  // namespace ddp
