// pretokenizer.cpp: PCRE2's compile, JIT and match loop.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "trainer/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "kernels/error.h"

namespace ddp {
namespace {

// Unicode's White_Space (PropList.txt, unchanged since 6.3), for \s and \S.
constexpr const char* kWhiteSpaceClass =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
    "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// `pattern` with \s and \S (outside and inside classes) spelled as White_Space.
std::string with_white_space_classes(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      ++i;
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpaceClass) : "[" + std::string(kWhiteSpaceClass) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceClass) + "]";
      } else if (next == 'S') {
        throw Error("pretokenizer: \\S inside a character class is not supported: " + pattern);
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer(const std::string& pattern) : compiled_(std::make_unique<Compiled>()) {
  const std::string spelled = with_white_space_classes(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelled.data()), spelled.size(), PCRE2_UTF | PCRE2_UCP,
                                  &error, &error_offset, nullptr);
  if (compiled_->code == nullptr)
    throw Error("pretokenizer: the pattern does not compile at offset " + std::to_string(error_offset) + ": " +
                pcre2_message(error));
  // Without a JIT (a build of PCRE2 without one, or an architecture it lacks)
  // the interpreter runs the same pattern, slower.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

bool Pretokenizer::jit_compiled() const { return compiled_->jit; }

void Pretokenizer::split(std::string_view text, std::vector<PieceSpan>& pieces) const {
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (match == nullptr) throw Error("pretokenizer: out of memory for PCRE2's match data");
  struct Free {
    pcre2_match_data* m;
    ~Free() { pcre2_match_data_free(m); }
  } free_match{match};
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    // NO_UTF_CHECK: the text was validated once, whole (utf8_repair.h);
    // PCRE2 would otherwise check the whole subject at every call.
    const int rc =
        compiled_->jit
            ? pcre2_jit_match(compiled_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, match, nullptr)
            : pcre2_match(compiled_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc < 0)
      throw Error("pretokenizer: matching at byte " + std::to_string(offset) + " failed: " + pcre2_message(rc));
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
    if (span[0] != offset || span[1] <= span[0])
      throw Error("pretokenizer: the pattern left bytes " + std::to_string(offset) + ".." + std::to_string(span[0]) +
                  " unmatched or matched nothing; it must cut any text into pieces");
    pieces.push_back({span[0], span[1]});
    offset = span[1];
  }
}

}  // namespace ddp
