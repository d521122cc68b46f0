// tokenizer_kind.cpp
#include "trainer/tokenizer/tokenizer_kind.h"

#include "kernels/error.h"

namespace ddp {

int tokenizer_vocab_size(const std::string& name) {
  if (name == kBytesTokenizer) return 256;
  if (name == kGpt2Tokenizer) return 50257;
  return 0;
}

void check_tokenizer_name(const std::string& name, const std::string& what) {
  if (tokenizer_vocab_size(name) == 0)
    throw Error(what + ": tokenizer '" + name + "' is not one of " + kBytesTokenizer + ", " + kGpt2Tokenizer);
}

std::string tokenizer_vocab_problem(const std::string& name, int real_vocab) {
  const int ids = tokenizer_vocab_size(name);
  if (real_vocab <= ids) return "";
  return "the model has " + std::to_string(real_vocab) + " classes and the " + name + " tokenizer " +
         std::to_string(ids) + " ids";
}

}  // namespace ddp
