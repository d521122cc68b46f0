// token_windows.cpp
#include "trainer/data/token_windows.h"

#include <cmath>

#include "trainer/io/data_error.h"

namespace ddp {

size_t token_window_count(size_t token_count, size_t block_size) {
  if (block_size == 0 || token_count < block_size + 1) return 0;
  return (token_count - 1) / block_size;
}

void require_one_window(size_t token_count, size_t block_size, const std::string& source) {
  if (token_window_count(token_count, block_size) == 0)
    throw DataError(source, std::to_string(token_count) + " tokens, fewer than --block-size " +
                                std::to_string(block_size) +
                                " + 1: not one window (T tokens of context and the token after them)");
}

Dataset make_token_windows(const std::vector<uint16_t>& tokens, size_t begin, size_t end, size_t block_size,
                           int vocab_size, int real_vocab_size, const std::string& source) {
  const size_t n = end - begin, t = block_size;
  require_one_window(n, t, source);
  Dataset d;
  d.count = token_window_count(n, t);
  d.tokens_per_sample = t;
  d.vocab_size = vocab_size;
  d.real_vocab_size = real_vocab_size;
  d.num_classes = vocab_size;  // the model's outputs; padded classes are never a label
  d.source = source;
  d.token_ids.resize(d.count * t);  // [count, T]
  d.labels.resize(d.count * t);     // [count, T]
  const uint16_t* stream = tokens.data() + begin;
  for (size_t i = 0; i < d.count; ++i) {
    const uint16_t* window = stream + i * t;  // T+1 tokens
    int32_t* ids = d.token_ids.data() + i * t;
    int32_t* next = d.labels.data() + i * t;
    for (size_t j = 0; j < t; ++j) {
      ids[j] = window[j];
      next[j] = window[j + 1];
    }
  }
  return d;
}

size_t validation_cut(size_t token_count, size_t block_size, double fraction) {
  // Tokens left for training before the cut is moved to a window boundary;
  // the validation split gets the floor's remainder too, so it is at least F.
  const auto validation_tokens = static_cast<size_t>(std::ceil(fraction * static_cast<double>(token_count)));
  const size_t before = validation_tokens >= token_count ? 0 : token_count - validation_tokens;
  const size_t windows = token_window_count(before, block_size);
  return windows == 0 ? 0 : windows * block_size + 1;
}

}  // namespace ddp
