// data_error.h: the exception for bad input data (missing, truncated, corrupt
// or mismatched data-set and weight files). Its message is one line that
// starts with the file it is about, so `main` can print it as is:
//   "train-images-idx3-ubyte.gz: truncated IDX file: header says ..."
#pragma once

#include <string>

#include "kernels/error.h"

namespace ddp {

class DataError : public Error {
 public:
  // `name` is the file (or other source) at fault, `problem` what is wrong.
  DataError(const std::string& name, const std::string& problem) : Error(one_line(name + ": " + problem)) {}

 private:
  // Messages quote bytes from the input (a header, a CSV field); control
  // characters there must not break the one-line promise or the terminal.
  static std::string one_line(std::string text) {
    for (char& c : text) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return text;
  }
};

// `text` in single quotes for a message, cut to `max_chars` with "...", so a
// megabyte-long bad field or header does not become a megabyte-long error.
inline std::string quote_excerpt(const std::string& text, size_t max_chars = 40) {
  if (text.size() <= max_chars) return "'" + text + "'";
  return "'" + text.substr(0, max_chars) + "...'";
}

}  // namespace ddp
