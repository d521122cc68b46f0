// gpt2_tokenizer.h: GPT-2's tokenizer (tiktoken's r50k_base): text to ids
// and back. encode() is tiktoken's encode_ordinary: the text is cut by the
// pre-tokenizer (pretokenizer.h) and each piece byte-pair merged
// (byte_pair_merge.h); "<|endoftext|>" written in a text is ordinary text
// (seven pieces of ids), never the special token, so a document cannot
// forge a document boundary; only a caller that means one adds
// end_of_text(). Large texts are encoded in chunks on several threads, cut
// only where cutting provably changes no piece (text_chunks.h), so the ids
// do not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/tokenizer/bpe_ranks.h"
#include "trainer/tokenizer/pretokenizer.h"

namespace ddp {

// GPT-2's vocabulary: 50,256 ranked tokens and <|endoftext|> = 50256.
constexpr uint32_t kGpt2EndOfText = 50256;
constexpr const char* kEndOfTextText = "<|endoftext|>";

// How many bytes a chunk of a large text holds, about (text_chunks.h):
// enough that a thread's set-up is nothing beside its work.
constexpr size_t kEncodeChunkBytes = size_t{1} << 20;

class Gpt2Tokenizer {
 public:
  // GPT-2's tokenizer on the r50k_base table at `ranks_path`; refuses (one
  // line, bpe_ranks.h) a file that is not a ranks table or not that one.
  static Gpt2Tokenizer from_ranks_file(const std::string& ranks_path);

  // GPT-2's pattern over any table (tests' small ones): <|endoftext|> is the
  // id after the last rank, as in GPT-2.
  explicit Gpt2Tokenizer(BpeRanks ranks);

  // The ids of `text`, which must be valid UTF-8 (repair_utf8 makes any bytes
  // so; ddp::Error at the first invalid byte otherwise). `threads` >= 1
  // workers encode chunks of about `chunk_bytes`; `progress`, if given, is
  // called from one thread at a time with the bytes done so far.
  std::vector<uint32_t> encode(std::string_view text, int threads = 1, size_t chunk_bytes = kEncodeChunkBytes,
                               const std::function<void(size_t)>& progress = nullptr) const;

  // The bytes of `ids` concatenated (<|endoftext|> as its text). A
  // DataError names the position of an id not below vocab_size().
  std::string decode(const std::vector<uint32_t>& ids) const;

  uint32_t end_of_text() const { return end_of_text_; }
  size_t vocab_size() const { return static_cast<size_t>(end_of_text_) + 1; }
  const Pretokenizer& pretokenizer() const { return pretokenizer_; }

 private:
  // The ids of one chunk, on the calling thread.
  void encode_chunk(std::string_view chunk, std::vector<uint32_t>& ids) const;

  BpeRanks ranks_;
  Pretokenizer pretokenizer_;
  uint32_t end_of_text_;
};

}  // namespace ddp
