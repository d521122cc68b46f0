// bpe_ranks.cpp: the ranks file's parser and the table's hash lookup.
#include "trainer/tokenizer/bpe_ranks.h"

#include <array>

#include "trainer/io/data_error.h"
#include "trainer/io/input_file.h"
#include "trainer/tokenizer/sha256.h"

namespace ddp {
namespace {

// FNV-1a: tokens are short (r50k_base's longest is 128 bytes, most under 8),
// so a byte-at-a-time hash costs less than a wider one's set-up.
uint64_t hash_bytes(const uint8_t* bytes, size_t count) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < count; ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

// The value of a base64 digit, or -1.
int base64_digit(uint8_t c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict RFC 4648 base64 (padded to a multiple of 4, '=' only at the end,
// unused bits zero), so that one token has one spelling; false otherwise.
bool decode_base64(const uint8_t* text, size_t count, std::string& out) {
  out.clear();
  if (count == 0 || count % 4 != 0) return false;
  size_t padding = 0;
  if (text[count - 1] == '=') padding = text[count - 2] == '=' ? 2 : 1;
  for (size_t quad = 0; quad < count; quad += 4) {
    const bool last = quad + 4 == count;
    uint32_t bits = 0;
    for (size_t k = 0; k < 4; ++k) {
      const bool pad = last && k >= 4 - padding;
      const int d = pad ? 0 : base64_digit(text[quad + k]);
      if (d < 0) return false;
      bits = (bits << 6) | static_cast<uint32_t>(d);
    }
    const size_t keep = last ? 3 - padding : 3;
    if (last && padding > 0 && (bits & ((1u << (8 * padding)) - 1)) != 0) return false;
    for (size_t k = 0; k < keep; ++k) out.push_back(static_cast<char>((bits >> (16 - 8 * k)) & 0xFF));
  }
  return true;
}

// A decimal rank below 2^31, digits only; false otherwise.
bool parse_rank(const uint8_t* text, size_t count, uint32_t& rank) {
  if (count == 0 || count > 10) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + (text[i] - '0');
  }
  if (value > 0x7FFFFFFFu) return false;
  rank = static_cast<uint32_t>(value);
  return true;
}

struct RankLine {
  std::string token;
  uint32_t rank = 0;
  size_t line = 0;  // from 1, for messages
};

std::string hex_byte(unsigned value) {
  static const char kHex[] = "0123456789ABCDEF";
  return std::string("0x") + kHex[value >> 4] + kHex[value & 15];
}

}  // namespace

BpeRanks BpeRanks::parse(const std::vector<uint8_t>& file_bytes, const std::string& name) {
  if (file_bytes.empty()) throw DataError(name, "is empty, not a BPE ranks table");
  std::vector<RankLine> lines;
  size_t start = 0;
  while (start < file_bytes.size()) {
    size_t end = start;
    while (end < file_bytes.size() && file_bytes[end] != '\n') ++end;
    const size_t number = lines.size() + 1;
    size_t space = start;
    while (space < end && file_bytes[space] != ' ') ++space;
    RankLine entry;
    entry.line = number;
    if (space == start || space == end || !decode_base64(file_bytes.data() + start, space - start, entry.token) ||
        !parse_rank(file_bytes.data() + space + 1, end - space - 1, entry.rank))
      throw DataError(name, "line " + std::to_string(number) +
                                " is not \"<base64 token> <rank>\": not a BPE ranks table (tiktoken's format)");
    lines.push_back(std::move(entry));
    start = end + 1;
  }

  // Ranks 0..n-1, each once: placed by rank, a second claim is a duplicate.
  const size_t n = lines.size();
  std::vector<size_t> line_of_rank(n, 0);
  for (const RankLine& l : lines) {
    if (l.rank >= n) continue;  // reported below as a gap
    if (line_of_rank[l.rank] != 0)
      throw DataError(name, "line " + std::to_string(l.line) + " gives rank " + std::to_string(l.rank) +
                                ", already given on line " + std::to_string(line_of_rank[l.rank]));
    line_of_rank[l.rank] = l.line;
  }
  for (size_t r = 0; r < n; ++r)
    if (line_of_rank[r] == 0)
      throw DataError(name, "ranks are not contiguous: rank " + std::to_string(r) + " is missing (" +
                                std::to_string(n) + " lines must give ranks 0.." + std::to_string(n - 1) + ")");

  BpeRanks table;
  table.offsets_.assign(n + 1, 0);
  for (size_t r = 0; r < n; ++r) table.offsets_[r + 1] = table.offsets_[r] + lines[line_of_rank[r] - 1].token.size();
  table.arena_.reserve(table.offsets_[n]);
  for (size_t r = 0; r < n; ++r) table.arena_ += lines[line_of_rank[r] - 1].token;

  size_t slot_count = 16;
  while (slot_count < 2 * n) slot_count *= 2;
  table.slots_.assign(slot_count, 0);
  const size_t mask = slot_count - 1;
  for (uint32_t r = 0; r < n; ++r) {
    const std::string_view token = table.token_bytes(r);
    const auto* bytes = reinterpret_cast<const uint8_t*>(token.data());
    const uint32_t earlier = table.rank_of(bytes, token.size());
    if (earlier != kNoRank)
      throw DataError(name, "line " + std::to_string(line_of_rank[r]) + " gives a token that line " +
                                std::to_string(line_of_rank[earlier]) + " already ranks");
    size_t slot = hash_bytes(bytes, token.size()) & mask;
    while (table.slots_[slot] != 0) slot = (slot + 1) & mask;
    table.slots_[slot] = r + 1;
  }
  for (unsigned b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    if (table.rank_of(&byte, 1) == kNoRank)
      throw DataError(
          name, "the single byte " + hex_byte(b) + " has no rank: a byte-level BPE table must rank all 256 bytes");
  }
  return table;
}

uint32_t BpeRanks::rank_of(const uint8_t* bytes, size_t count) const {
  const size_t mask = slots_.size() - 1;
  size_t slot = hash_bytes(bytes, count) & mask;
  while (slots_[slot] != 0) {
    const uint32_t rank = slots_[slot] - 1;
    const uint64_t begin = offsets_[rank];
    if (offsets_[rank + 1] - begin == count &&
        arena_.compare(begin, count, reinterpret_cast<const char*>(bytes), count) == 0)
      return rank;
    slot = (slot + 1) & mask;
  }
  return kNoRank;
}

BpeRanks load_bpe_ranks(const std::string& path, const std::string& expected_sha256, const std::string& table_name) {
  const std::vector<uint8_t> bytes = read_input_file(path, kRanksFileCapBytes, "BPE ranks file");
  BpeRanks table = BpeRanks::parse(bytes, path);
  if (!expected_sha256.empty()) {
    const std::string got = sha256_hex(bytes);
    if (got != expected_sha256)
      throw DataError(path, "a ranks table of " + std::to_string(table.size()) + " tokens with sha256 " + got +
                                ", not " + table_name + " (sha256 " + expected_sha256 + ")");
  }
  return table;
}

}  // namespace ddp
