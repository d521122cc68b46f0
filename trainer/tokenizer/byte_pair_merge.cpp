// byte_pair_merge.cpp: tiktoken's merge loop (src/lib.rs, _byte_pair_merge),
// over a vector of (part start, rank of the pair starting there). Each merge
// rescans for the minimum: O(n^2) in a piece's length, as tiktoken's, and
// pieces are short (a word, a run of digits or spaces).
#include "trainer/tokenizer/byte_pair_merge.h"

#include "kernels/error.h"

namespace ddp {
namespace {

// A part packed as (start << 32 | rank): one vector, one erase per merge.
inline uint64_t pack(uint64_t start, uint32_t rank) { return start << 32 | rank; }
inline size_t start_of(uint64_t part) { return static_cast<size_t>(part >> 32); }
inline uint32_t rank_of_part(uint64_t part) { return static_cast<uint32_t>(part); }

}  // namespace

void byte_pair_encode(const BpeRanks& ranks, std::string_view piece, std::vector<uint32_t>& ids,
                      std::vector<uint64_t>& scratch) {
  const uint32_t whole = ranks.rank_of(piece);
  if (whole != kNoRank) {
    ids.push_back(whole);
    return;
  }
  if (piece.size() > 0xFFFFFFFFu) throw Error("byte_pair_encode: a piece of 4 GiB or more");
  const auto* bytes = reinterpret_cast<const uint8_t*>(piece.data());
  const size_t n = piece.size();
  // The rank of the token spanning parts[i] .. parts[i + skip] (exclusive),
  // or kNoRank where that is past the end.
  auto pair_rank = [&](const std::vector<uint64_t>& parts, size_t i, size_t skip) {
    if (i + skip >= parts.size()) return kNoRank;
    const size_t begin = start_of(parts[i]);
    return ranks.rank_of(bytes + begin, start_of(parts[i + skip]) - begin);
  };
  std::vector<uint64_t>& parts = scratch;
  parts.clear();
  for (size_t i = 0; i <= n; ++i) parts.push_back(pack(i, kNoRank));  // parts[n]: the end sentinel
  for (size_t i = 0; i + 1 < n; ++i) parts[i] = pack(i, ranks.rank_of(bytes + i, 2));

  for (;;) {
    uint32_t min_rank = kNoRank;
    size_t min_at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (rank_of_part(parts[i]) < min_rank) {
        min_rank = rank_of_part(parts[i]);
        min_at = i;
      }
    }
    if (min_rank == kNoRank) break;
    // Merge parts[min_at] with parts[min_at + 1]: the pairs that change are
    // the one ending at the merged part and the one starting at it, both
    // ranked as they will be once parts[min_at + 1] is gone.
    if (min_at > 0) parts[min_at - 1] = pack(start_of(parts[min_at - 1]), pair_rank(parts, min_at - 1, 3));
    parts[min_at] = pack(start_of(parts[min_at]), pair_rank(parts, min_at, 3));
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(min_at) + 1);
  }

  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const size_t begin = start_of(parts[i]);
    const uint32_t id = ranks.rank_of(bytes + begin, start_of(parts[i + 1]) - begin);
    if (id == kNoRank) throw Error("byte_pair_encode: a merged part is no token (the ranks table is inconsistent)");
    ids.push_back(id);
  }
}

}  // namespace ddp
