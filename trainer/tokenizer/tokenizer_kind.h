// tokenizer_kind.h: which tokenizer a language model's ids belong to, by the
// name a checkpoint, a weights file and --tokenizer record it under:
//   "bytes"  each byte is its own id (vocabulary 256);
//   "gpt2"   GPT-2's byte-level BPE, r50k_base (vocabulary 50257).
// "" is unknown: a raw uint16 file of another tokenizer, or weights written
// before tokenizers were recorded. A later --generate reads the record, so it
// cannot decode a model's ids with another tokenizer than the one it learnt.
#pragma once

#include <string>

namespace ddp {

constexpr const char* kBytesTokenizer = "bytes";
constexpr const char* kGpt2Tokenizer = "gpt2";

// The ids a known tokenizer has (256, 50257); 0 for any other name.
int tokenizer_vocab_size(const std::string& name);

// Throws one line naming `what` (a flag, a file) unless `name` is a known tokenizer.
void check_tokenizer_name(const std::string& name, const std::string& what);

// Whether a model of `real_vocab` classes can be a model of tokenizer `name`
// (each of its classes an id the tokenizer decodes): "" or the problem.
std::string tokenizer_vocab_problem(const std::string& name, int real_vocab);

}  // namespace ddp
