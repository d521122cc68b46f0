// byte_pair_merge.h: one piece of text (pretokenizer.h) to token ids by
// rank-ordered byte-pair merges, as tiktoken's _byte_pair_merge: start from
// the piece's single bytes; while some adjacent pair of parts spells a
// token, merge the pair whose token has the lowest rank (the leftmost such
// pair where the same token occurs twice); the parts left are the ids. A
// piece that is itself a token is that one id, without merging (tiktoken
// looks the whole piece up first, and so does this).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "trainer/tokenizer/bpe_ranks.h"

namespace ddp {

// Appends the ids of `piece` (non-empty) to `ids`. `scratch` is reused
// between calls to keep the loop free of allocations.
void byte_pair_encode(const BpeRanks& ranks, std::string_view piece, std::vector<uint32_t>& ids,
                      std::vector<uint64_t>& scratch);

}  // namespace ddp
