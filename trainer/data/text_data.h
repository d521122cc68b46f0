// text_data.h: --data text, the train and validation sets of a language
// model: --train-text read as tokens (token_files.h), cut into windows of
// --block-size + 1 (token_windows.h), validated on --val-text or on the last
// --val-fraction of the training text.
//
// The vocabulary: Dataset::real_vocab_size is the tokenizer's (256 for
// bytes, GPT-2's 50257 for llm.c shards and raw uint16 files), and every
// token id must be below it. Dataset::vocab_size is the model's: --vocab-size
// when given (then also the bound of the ids, e.g. 65 for a character-level
// raw-u16 file), else the tokenizer's padded up to a multiple of 128 for the
// GEMMs, as llm.c pads 50257 to 50304 (bytes stay 256).
#pragma once

#include <cstdint>
#include <string>

#include "trainer/config/train_config.h"
#include "trainer/data/data_source.h"
#include "trainer/data/token_files.h"

namespace ddp {

constexpr int kVocabPadMultiple = 128;

struct TokenVocab {
  int vocab_size = 0;       // the model's (padded) vocabulary
  int real_vocab_size = 0;  // the tokenizer's: every id is below it
  std::string bound_text;   // where real_vocab_size came from, for messages
};

// The vocabulary of a file read as `encoding`, with --vocab-size
// `vocab_size_flag` (0: not given).
TokenVocab token_vocab(TokenEncoding encoding, int64_t vocab_size_flag);

// Throws DataError / Error with one line naming the file or flag: a text
// shorter than --block-size + 1 tokens, an empty validation split, a token
// id not below the vocabulary, a validation file of another encoding.
TrainTestData load_text_train_test(const DataConfig& config);

}  // namespace ddp
