// text_chunks.h: where a text may be cut so that its chunks, pre-tokenized
// apart, give exactly the pieces of the whole (and so the same ids): the
// rule that lets the encoder run chunks on several threads.
//
// A cut at byte p is safe when the character before it, text[p-1], is an
// ASCII byte that is not whitespace and text[p] is ASCII whitespace (space,
// \t, \n, \v, \f, \r). Why, for GPT-2's pattern (pretokenizer.h):
//  - no match can contain both text[p-1] and text[p]: a match holds a
//    non-space before a space in none of its alternatives (the optional
//    space of " ?\p{L}+" and its siblings comes first, the contractions and
//    the runs of letters, digits or symbols hold no space, and the two
//    whitespace alternatives hold nothing else), so p ends a match of the
//    whole text;
//  - the matches left of p never looked past it: every alternative's
//    candidates there end at p at most, and the one look-ahead, "(?!\S)",
//    follows whitespace, which ends before p-1, so it reads a byte before p;
//  - the matches from p on depend only on text[p..]: the pattern has no
//    look-behind, no anchor and no \b.
// A text with no such byte pair (one long word) stays one chunk.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace ddp {

// True where cutting `text` before byte `p` (0 < p < size) is safe as above.
bool is_safe_cut(std::string_view text, size_t p);

// Chunk boundaries [0, c1, ..., size]: each cut the first safe one at or after
// the previous boundary plus `target_bytes` (> 0), so chunks are at least
// target_bytes long except the last. An empty text gives [0, 0].
std::vector<size_t> chunk_boundaries(std::string_view text, size_t target_bytes);

}  // namespace ddp
