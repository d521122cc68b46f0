// gpt2_tokenizer.cpp: chunks to worker threads, pieces to merges, ids back
// to bytes.
#include "trainer/tokenizer/gpt2_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "kernels/error.h"
#include "trainer/io/data_error.h"
#include "trainer/tokenizer/byte_pair_merge.h"
#include "trainer/tokenizer/text_chunks.h"
#include "trainer/tokenizer/utf8_repair.h"

namespace ddp {

Gpt2Tokenizer Gpt2Tokenizer::from_ranks_file(const std::string& ranks_path) {
  Gpt2Tokenizer tokenizer(load_bpe_ranks(ranks_path, kR50kBaseSha256, "GPT-2's r50k_base"));
  if (tokenizer.end_of_text() != kGpt2EndOfText)  // the pinned hash makes this unreachable; kept as the claim
    throw DataError(ranks_path, "r50k_base must have " + std::to_string(kGpt2EndOfText) + " ranks");
  return tokenizer;
}

Gpt2Tokenizer::Gpt2Tokenizer(BpeRanks ranks)
    : ranks_(std::move(ranks)),
      pretokenizer_(kGpt2PretokenizerPattern),
      end_of_text_(static_cast<uint32_t>(ranks_.size())) {}

void Gpt2Tokenizer::encode_chunk(std::string_view chunk, std::vector<uint32_t>& ids) const {
  std::vector<PieceSpan> pieces;
  pieces.reserve(chunk.size() / 4 + 1);
  pretokenizer_.split(chunk, pieces);
  std::vector<uint64_t> scratch;
  for (const PieceSpan& piece : pieces)
    byte_pair_encode(ranks_, chunk.substr(piece.begin, piece.end - piece.begin), ids, scratch);
}

std::vector<uint32_t> Gpt2Tokenizer::encode(std::string_view text, int threads, size_t chunk_bytes,
                                            const std::function<void(size_t)>& progress) const {
  const size_t bad = first_invalid_utf8(text);
  if (bad != text.size())
    throw Error("encode: the text is not valid UTF-8 at byte " + std::to_string(bad) +
                " (repair_utf8 replaces ill-formed sequences by U+FFFD first)");
  const std::vector<size_t> cuts = chunk_boundaries(text, std::max<size_t>(chunk_bytes, 1));
  const size_t chunk_count = cuts.size() - 1;
  std::vector<std::vector<uint32_t>> chunk_ids(chunk_count);
  std::atomic<size_t> next{0};
  std::mutex progress_mutex;
  size_t done_bytes = 0;
  std::exception_ptr failure;
  auto work = [&] {
    try {
      for (size_t c = next++; c < chunk_count; c = next++) {
        const std::string_view chunk = text.substr(cuts[c], cuts[c + 1] - cuts[c]);
        chunk_ids[c].reserve(chunk.size() / 3 + 1);
        encode_chunk(chunk, chunk_ids[c]);
        if (progress) {
          std::lock_guard<std::mutex> lock(progress_mutex);
          done_bytes += chunk.size();
          progress(done_bytes);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      if (!failure) failure = std::current_exception();
      next = chunk_count;  // the others stop at their next chunk
    }
  };
  const size_t workers = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), chunk_count);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();  // the calling thread is a worker too
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);

  size_t total = 0;
  for (const auto& ids : chunk_ids) total += ids.size();
  std::vector<uint32_t> ids;
  ids.reserve(total);
  for (auto& chunk : chunk_ids) {
    ids.insert(ids.end(), chunk.begin(), chunk.end());
    std::vector<uint32_t>().swap(chunk);
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id == end_of_text_) {
      bytes += kEndOfTextText;
    } else if (id < end_of_text_) {
      bytes += ranks_.token_bytes(id);
    } else {
      throw DataError("decode", "token id " + std::to_string(id) + " at position " + std::to_string(i) +
                                    " is not below the vocabulary " + std::to_string(vocab_size()));
    }
  }
  return bytes;
}

}  // namespace ddp
