// rank_agreement.cpp
#include "trainer/config/rank_agreement.h"

#include "kernels/error.h"

namespace ddp {
namespace {

// FNV-1a, 64 bits: the digests are compared, never trusted against an
// adversary, and two settings that differ by a byte differ here.
uint64_t digest(const std::string& text, uint64_t h = 14695981039346656037ull) {
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// "ranks 1, 3" / "rank 2"; long lists end in "and N more".
std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kShown = 8;
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kShown) out += " and " + std::to_string(ranks.size() - kShown) + " more";
  return out;
}

// A value in the line: short, one line (a directory's identity can be long).
std::string shown(const std::string& value) {
  constexpr size_t kMaxChars = 120;
  std::string out = value.empty() || value == "''" ? "(empty)" : value;
  for (char& ch : out)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (out.size() > kMaxChars) out = out.substr(0, kMaxChars) + "...";
  return out;
}

}  // namespace

std::vector<uint64_t> agreement_record(const std::vector<Setting>& settings) {
  if (settings.size() > kMaxSettings)
    throw Error("start-up agreement: " + std::to_string(settings.size()) + " settings, above the record's " +
                std::to_string(kMaxSettings));
  std::vector<uint64_t> record(kAgreementWords, 0);
  record[0] = settings.size();
  uint64_t names = digest("");
  for (size_t i = 0; i < settings.size(); ++i) {
    names = digest(settings[i].name + '\n', names);
    // The name is part of the value's digest: a value never matches another setting's.
    record[2 + i] = digest(settings[i].value, digest(settings[i].name + '\n'));
  }
  record[1] = names;
  return record;
}

std::string find_disagreement(const std::vector<Setting>& settings, const std::vector<uint64_t>& gathered,
                              int world_size) {
  DDP_REQUIRE(gathered.size() == kAgreementWords * static_cast<size_t>(world_size), "a record per rank");
  const auto word = [&](int rank, size_t i) { return gathered[static_cast<size_t>(rank) * kAgreementWords + i]; };
  const std::string tail = " (every rank must be started with the same flags, config file and data)";
  // Another build lists other settings: name the ranks, not a setting.
  std::vector<int> other_build;
  for (int r = 1; r < world_size; ++r)
    if (word(r, 0) != word(0, 0) || word(r, 1) != word(0, 1)) other_build.push_back(r);
  if (!other_build.empty())
    return "the ranks run different builds of ddp_train: " + rank_list(other_build) +
           (other_build.size() == 1 ? " knows" : " know") + " other flags than rank 0 (start every rank with the same binary)";
  for (size_t i = 0; i < settings.size(); ++i) {
    std::vector<int> differ;
    for (int r = 1; r < world_size; ++r)
      if (word(r, 2 + i) != word(0, 2 + i)) differ.push_back(r);
    if (differ.empty()) continue;
    // Every rank holds the same words, so every rank names the same setting;
    // rank 0's value is known here only on rank 0, which prints the line.
    return "the ranks disagree on " + settings[i].name + ": " + rank_list(differ) +
           (differ.size() == 1 ? " differs" : " differ") + " from rank 0's " +
           shown(settings[i].value) + tail;
  }
  return "";
}

}  // namespace ddp
