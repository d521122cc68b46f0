// pretokenizer.h: a text cut into pieces by a regular expression before
// byte-pair merges run inside each piece (merges never cross a piece), as
// tiktoken's CoreBPE does with its pat_str. PCRE2 (Debian's libpcre2-8)
// runs the pattern, in UTF and UCP mode (\p{L}, \p{N} and \s by Unicode
// properties), JIT-compiled where the library has a JIT.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// GPT-2's pattern (encoder.py, and tiktoken's r50k_base, whose pat_str is an
// equivalent, faster spelling of it: possessive repeats, \s++$ and a final \s
// where this has \s+): contractions, an optional space and a run of
// letters, of digits, or of other symbols, whitespace not followed by a
// non-space (so a space before a word stays with the word), whitespace.
// \s is spelled out as Unicode's White_Space property, which is what
// tiktoken's regex engine (Rust's fancy-regex) means by it: PCRE2's UCP \s
// (\p{Z}, \h and \v) also takes U+180E MONGOLIAN VOWEL SEPARATOR, which left
// White_Space in Unicode 6.3 and which tiktoken treats as a symbol.
constexpr const char* kGpt2PretokenizerPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct PieceSpan {
  size_t begin;  // byte offsets into the text split
  size_t end;
};

class Pretokenizer {
 public:
  // Compiles `pattern`; ddp::Error with PCRE2's message and offset when it
  // does not compile.
  explicit Pretokenizer(const std::string& pattern);
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Appends to `pieces` the matches of the pattern over `text` (which must be
  // valid UTF-8: it is not checked again, see utf8_repair.h), leftmost first,
  // each starting where the last ended. Safe to call from several threads at
  // once (each call has its own match data). ddp::Error when a match fails
  // (PCRE2's message) or leaves a gap (a pattern that does not tile text).
  void split(std::string_view text, std::vector<PieceSpan>& pieces) const;

  bool jit_compiled() const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace ddp
