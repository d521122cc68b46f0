// bpe_ranks.h: a byte-pair-encoding ranks table in tiktoken's file format,
// one token a line: its bytes in base64 (RFC 4648, padded), a space, its
// rank in decimal. A token's rank is its id, and the order its merge is
// applied in (lower first; byte_pair_merge.h). GPT-2's r50k_base table
// (launch/fetch_gpt2_ranks.sh) has 50,256 of them: the 256 single bytes and
// 50,000 merges; its special token <|endoftext|> is not in the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// rank_of's answer for bytes that are no token.
constexpr uint32_t kNoRank = UINT32_MAX;

// The sha256 tiktoken pins for r50k_base.tiktoken (tiktoken_ext/openai_public.py).
constexpr const char* kR50kBaseSha256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930";

// The largest ranks file read (r50k_base: 0.8 MB; o200k_base: 3.6 MB).
constexpr size_t kRanksFileCapBytes = size_t{256} << 20;

class BpeRanks {
 public:
  // Parses a whole table. DataError "<name>: <problem>" (one line) for an
  // empty file, a line that is not "<base64> <rank>" (its number, from 1),
  // an empty token, a rank given twice or a token given twice (both lines
  // named), ranks that are not 0..n-1 (the first missing one), and a single
  // byte without a rank (byte-level BPE must be able to spell any byte).
  static BpeRanks parse(const std::vector<uint8_t>& file_bytes, const std::string& name);

  size_t size() const { return offsets_.size() - 1; }  // tokens: ranks 0 .. size()-1
  // The rank of the token spelled by bytes[0, count), or kNoRank.
  uint32_t rank_of(const uint8_t* bytes, size_t count) const;
  uint32_t rank_of(std::string_view bytes) const {
    return rank_of(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  // The bytes of the token of `rank` (< size()).
  std::string_view token_bytes(uint32_t rank) const {
    return std::string_view(arena_).substr(offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
  }

 private:
  BpeRanks() = default;
  std::string arena_;              // every token's bytes, in rank order
  std::vector<uint64_t> offsets_;  // [size + 1]: token r is arena_[offsets_[r], offsets_[r + 1])
  std::vector<uint32_t> slots_;    // open addressing, a power of two >= 2 size: rank + 1, 0 empty
};

// Reads the regular file `path` (at most kRanksFileCapBytes) and parses it.
// With `expected_sha256` given, a well-formed table whose file has another
// sha256 is refused in one line naming both hashes and `table_name` ("GPT-2's
// r50k_base"), so a tokenizer never runs on a table it was not meant for.
BpeRanks load_bpe_ranks(const std::string& path, const std::string& expected_sha256 = "",
                        const std::string& table_name = "");

}  // namespace ddp
