// token_windows.h: a token stream as language-model samples, in the token
// form of Dataset (dataset.h), so the sampler, the batch loader, shuffling,
// sharding over ranks and resume work on it unchanged.
//
// Samples are non-overlapping windows of T+1 tokens at stride T, llm.c's
// DataLoader layout: window i is tokens[i*T, i*T + T] (inclusive), its input
// the first T (token_ids[i] = tokens[i*T .. i*T+T-1]) and its targets the
// same shifted by one (labels[i] = tokens[i*T+1 .. i*T+T]). Consecutive
// windows share one token (the last target of one is the first input of the
// next), so every token but the first is a target exactly once; a stream of n
// tokens makes (n-1)/T windows and the tail that fills no window is unused.
// An epoch is then a shuffled set of window starts (the sampler's
// permutation of the window indices).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/dataset.h"

namespace ddp {

// (n-1)/T: the windows of T+1 tokens at stride T in n tokens (0 below T+1).
size_t token_window_count(size_t token_count, size_t block_size);

// DataError("<source>: 100 tokens, fewer than --block-size 128 + 1: ...")
// unless `token_count` tokens make at least one window.
void require_one_window(size_t token_count, size_t block_size, const std::string& source);

// The windows of tokens[begin, end) as a Dataset: count windows, T =
// block_size, vocab_size and num_classes the model's (padded) vocabulary,
// real_vocab_size the tokenizer's. The ids are assumed checked against the
// vocabulary (token_files.h: require_tokens_below). require_one_window's
// DataError when the range is shorter than T+1 tokens.
Dataset make_token_windows(const std::vector<uint16_t>& tokens, size_t begin, size_t end, size_t block_size,
                           int vocab_size, int real_vocab_size, const std::string& source);

// Where --val-fraction F cuts a stream of n tokens: the training split is
// tokens[0, cut), the validation split tokens[cut, n), at least the last F of
// the stream. The cut lies on a window boundary of the training split (cut =
// K*T + 1 for its K windows), so that split has no unused tail and the two
// splits share no token. Returns 0 when not one training window is left.
size_t validation_cut(size_t token_count, size_t block_size, double fraction);

}  // namespace ddp
