// text_data.h: --data text, the train and validation sets of a language
// model: --train-text read as tokens (token_files.h), cut into windows of
// --block-size + 1 (token_windows.h), validated on --val-text or on the last
// --val-fraction of the training text.
//
// The vocabulary: Dataset::vocab_size is the model's (its embedding rows,
// its logits per position), Dataset::real_vocab_size the tokenizer's, and
// every token id must be below the latter.
//   default            the tokenizer's padded up to a multiple of 128 for the
//                      GEMMs, as llm.c pads GPT-2's 50257 to 50304: bytes
//                      256/256; llm.c shards and raw uint16 files 50304/50257.
//   --vocab-size V     the model's is V. The tokenizer's is the encoding's
//                      own where it defines one and V is larger (bytes: 256;
//                      llm.c version 1: GPT-2's 50257), so V pads it; else V
//                      (a raw uint16 file of another tokenizer, e.g. 65
//                      characters; or an unpadded 50257 to match a GPT-2
//                      checkpoint).
#pragma once

#include <cstdint>
#include <string>

#include "trainer/data/data_config.h"
#include "trainer/data/data_source.h"
#include "trainer/data/token_files.h"

namespace ddp {

constexpr int kVocabPadMultiple = 128;

struct TokenVocab {
  int vocab_size = 0;       // the model's (padded) vocabulary
  int real_vocab_size = 0;  // the tokenizer's: every id is below it
  std::string bound_text;   // where real_vocab_size came from, for messages
  // The ids' tokenizer: bytes' "bytes"; llm.c's "gpt2" (its shards are GPT-2
  // tokens); a raw uint16 file's "gpt2" without --vocab-size (the default
  // reads it as GPT-2's), else "" (another tokenizer's, unknown).
  std::string tokenizer;
};

// The vocabulary of a file read as `encoding`, with --vocab-size
// `vocab_size_flag` (0: not given).
TokenVocab token_vocab(TokenEncoding encoding, int64_t vocab_size_flag);

// Throws DataError / Error with one line naming the file or flag: a text
// shorter than --block-size + 1 tokens, an empty validation split, a token
// id not below the vocabulary, a validation file of another encoding.
TrainTestData load_text_train_test(const DataConfig& config);

}  // namespace ddp
