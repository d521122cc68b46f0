// escaped_text_support.h (tests): the inverse of training_sampler.h's
// escaped_bytes (\n, \t, \r, \\, \xHH), written from its contract, for the
// tests that read --sample-every lines back into bytes.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace ddp::test {

inline std::string unescaped(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    const char e = text.at(++i);
    if (e == 'n')
      out += '\n';
    else if (e == 't')
      out += '\t';
    else if (e == 'r')
      out += '\r';
    else if (e == '\\')
      out += '\\';
    else if (e == 'x') {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else
      ADD_FAILURE() << "unknown escape \\" << e;
  }
  return out;
}

}  // namespace ddp::test
