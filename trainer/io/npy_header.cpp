// npy_header.cpp: a small recursive-descent reader for the .npy header dict.
// numpy writes it with repr(), so keys are quoted strings, 'descr' a string
// (a list for structured dtypes, which we refuse), 'fortran_order' True or
// False and 'shape' a tuple of ints (Python 2 files wrote "3L").
#include "trainer/io/npy_header.h"

#include <cctype>

#include "trainer/io/data_error.h"

namespace ddp {

namespace {

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : text_(text), name_(name) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!peek_is('}')) {
      const std::string key = parse_string("a key");
      expect(':');
      if (key == "descr") {
        mark_seen(seen_descr, key);
        if (peek_is('['))
          throw DataError(name_, "unsupported dtype: structured arrays (a 'descr' list) are not supported");
        header.descr = parse_string("the 'descr' value");
      } else if (key == "fortran_order") {
        mark_seen(seen_order, key);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(seen_shape, key);
        header.shape = parse_shape();
      } else {
        fail("unexpected key " + quote_excerpt(key));
      }
      if (!peek_is('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the dictionary");
    if (!seen_descr) fail("missing key 'descr'");
    if (!seen_order) fail("missing key 'fortran_order'");
    if (!seen_shape) fail("missing key 'shape'");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(name_, "bad npy header: " + what + " in " + quote_excerpt(text_, 80));
  }

  void mark_seen(bool& seen, const std::string& key) const {
    if (seen) fail("key '" + key + "' appears twice");
    seen = true;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool peek_is(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  void expect(char c) {
    if (!peek_is(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  std::string parse_string(const char* what) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail(std::string("expected ") + what);
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string value = text_.substr(pos_, end - pos_);
    // numpy never escapes anything in these strings; a backslash means the
    // header is not one numpy wrote, and we would misread it.
    if (value.find('\\') != std::string::npos) fail("escape sequence in a string");
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string w = word;
      if (text_.compare(pos_, w.size(), w) == 0) {
        pos_ += w.size();
        return value;
      }
    }
    fail("'fortran_order' must be True or False");
  }

  std::vector<size_t> parse_shape() {
    std::vector<size_t> shape;
    expect('(');
    while (!peek_is(')')) {
      if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        fail("'shape' must be a tuple of non-negative integers");
      }
      size_t dim = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (dim > (size_t{1} << 56)) fail("'shape' dimension too large");
        dim = dim * 10 + static_cast<size_t>(text_[pos_++] - '0');
      }
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long
      shape.push_back(dim);
      if (!peek_is(')')) expect(',');
    }
    expect(')');
    return shape;
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(const std::string& text, const std::string& name) {
  return HeaderParser(text, name).parse();
}

std::string npy_shape_text(const std::vector<size_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string format_npy_header(const std::string& descr, const std::vector<size_t>& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + npy_shape_text(shape) + ", }";
}

}  // namespace ddp
