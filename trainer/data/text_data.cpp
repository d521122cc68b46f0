// text_data.cpp
#include "trainer/data/text_data.h"

#include <cmath>
#include <sstream>

#include "kernels/error.h"
#include "trainer/io/data_error.h"
#include "trainer/io/input_file.h"
#include "trainer/data/token_windows.h"
#include "trainer/tokenizer/tokenizer_kind.h"

namespace ddp {
namespace {

// "10%", "2.5%": --val-fraction as the split's name says it; "0.1" as given.
std::string percent_text(double fraction) {
  std::ostringstream out;
  out << fraction * 100 << "%";
  return out.str();
}
std::string fraction_text(double fraction) {
  std::ostringstream out;
  out << fraction;
  return out.str();
}

// The windows of a stream take 2 x 4 bytes per token (ids and labels as
// int32), on top of the stream itself: refused above the input limit
// before allocating, as every reader refuses a file that large.
void require_windows_fit(const TokenStream& stream) {
  require_within_limit(stream.source, stream.tokens.size() * 2 * sizeof(int32_t), input_limit_bytes(),
                       "its token windows (ids and labels as int32)");
}

}  // namespace

TokenVocab token_vocab(TokenEncoding encoding, int64_t vocab_size_flag) {
  TokenVocab v;
  const bool bytes = encoding == TokenEncoding::Bytes;
  // The vocabulary the encoding itself defines: bytes, and llm.c's version-1
  // shards (GPT-2 tokens). A raw uint16 file says nothing of its tokenizer.
  const int own = bytes ? kByteVocabSize : kGpt2VocabSize;
  const bool defined = bytes || encoding == TokenEncoding::Llmc;
  const std::string own_text = bytes ? "the byte vocabulary 256" : "GPT-2's vocabulary 50257";
  v.tokenizer = bytes ? kBytesTokenizer : kGpt2Tokenizer;
  if (vocab_size_flag > 0) {
    if (!defined) v.tokenizer.clear();
    v.vocab_size = static_cast<int>(vocab_size_flag);
    const bool own_is_smaller = defined && own < v.vocab_size;
    v.real_vocab_size = own_is_smaller ? own : v.vocab_size;
    v.bound_text = own_is_smaller ? own_text + " (--vocab-size " + std::to_string(vocab_size_flag) + " pads it)"
                                  : "--vocab-size " + std::to_string(vocab_size_flag);
    return v;
  }
  v.real_vocab_size = own;
  v.vocab_size = (own + kVocabPadMultiple - 1) / kVocabPadMultiple * kVocabPadMultiple;
  v.bound_text = bytes ? own_text : own_text + " (another tokenizer: give --vocab-size)";
  return v;
}

namespace {

// The windows of both splits; `tokenizer` gets their ids' tokenizer.
TrainTestData load_windows(const DataConfig& c, std::string& tokenizer) {
  if (c.train_text.empty()) throw Error("--train-text is required with --data text");
  const TokenFormat format = parse_token_format(c.token_format);
  const auto t = static_cast<size_t>(c.block_size);
  const TokenStream train = read_token_file(c.train_text, format);
  const TokenVocab vocab = token_vocab(train.encoding, c.vocab_size);
  tokenizer = vocab.tokenizer;
  require_tokens_below(train, vocab.real_vocab_size, vocab.bound_text);
  require_windows_fit(train);
  TrainTestData d;
  if (!c.val_text.empty()) {
    const TokenStream val = read_token_file(c.val_text, format);
    // Auto-detection reads each file on its own: a byte text validating
    // GPT-2 tokens would be a loss of another vocabulary.
    if (val.encoding != train.encoding)
      throw DataError(c.val_text, std::string("read as ") + token_encoding_name(val.encoding) + ", and --train-text " +
                                      c.train_text + " as " + token_encoding_name(train.encoding) +
                                      ": give files of one tokenizer");
    require_tokens_below(val, vocab.real_vocab_size, vocab.bound_text);
    require_windows_fit(val);
    d.train = make_token_windows(train.tokens, 0, train.tokens.size(), t, vocab.vocab_size, vocab.real_vocab_size,
                                 c.train_text);
    d.test =
        make_token_windows(val.tokens, 0, val.tokens.size(), t, vocab.vocab_size, vocab.real_vocab_size, c.val_text);
    return d;
  }
  const size_t n = train.tokens.size();
  require_one_window(n, t, c.train_text);  // too short whatever the split
  const size_t cut = validation_cut(n, t, c.val_fraction);
  const std::string split = "--val-fraction " + fraction_text(c.val_fraction) + " of " + std::to_string(n) + " tokens";
  if (cut == 0)
    throw DataError(c.train_text, "no training split: " + split + " leaves fewer than --block-size " +
                                      std::to_string(t) + " + 1 tokens to train on");
  if (token_window_count(n - cut, t) == 0)
    throw DataError(c.train_text, "empty validation split: " + split + " leaves " + std::to_string(n - cut) +
                                      " tokens after the last training window, fewer than --block-size " +
                                      std::to_string(t) + " + 1 (raise --val-fraction or give --val-text)");
  d.train = make_token_windows(train.tokens, 0, cut, t, vocab.vocab_size, vocab.real_vocab_size, c.train_text);
  d.test = make_token_windows(train.tokens, cut, n, t, vocab.vocab_size, vocab.real_vocab_size,
                              c.train_text + " (validation: the last " + percent_text(c.val_fraction) + ")");
  return d;
}

}  // namespace

TrainTestData load_text_train_test(const DataConfig& c) {
  std::string tokenizer;
  TrainTestData d = load_windows(c, tokenizer);
  d.train.tokenizer = tokenizer;
  d.test.tokenizer = tokenizer;
  return d;
}

}  // namespace ddp
