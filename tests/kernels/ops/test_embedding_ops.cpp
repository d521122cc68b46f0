// test_embedding_ops.cpp: cuda_embedding.cu's kernels (the token + position
// embedding; its backward's row index, table gradient over runs of equal
// tokens after the stable sort, and position gradient) against the CPU loops
// (kernels/cpu/cpu_transformer.h), FP16 and BF16 (op_test_support.h).
//
// Tolerance: bitwise (tests/cuda/transformer_compare_support.h). The
// forward is one FP32 add of two 16-bit values; the backward adds each
// token's rows in increasing row order and each position's rows in
// increasing batch index on both sides, one rounding.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_transformer.h"
#include "kernels/cuda/cuda_transformer.h"
#include "kernels/error.h"
#include "kernels/ops/op_test_support.h"

namespace ddp::test {
namespace {

using EmbeddingOps = OpTest;

struct EmbeddingShape {
  int batch, seq_len, channels, vocab;
  size_t rows() const { return static_cast<size_t>(batch) * seq_len; }
  std::string text() const {
    return "B=" + std::to_string(batch) + " T=" + std::to_string(seq_len) + " C=" + std::to_string(channels) +
           " V=" + std::to_string(vocab);
  }
};

// Random tokens with a frequent one (a long run after the sort) and, where
// there are rows enough, tokens out of [0, vocab): -1 (first after the
// signed sort) and vocab + 5.
std::vector<int32_t> embedding_tokens(std::mt19937_64& rng, const EmbeddingShape& s) {
  std::vector<int32_t> tokens = random_labels(rng, s.rows(), s.vocab);
  for (size_t r = 0; r < tokens.size(); r += 3) tokens[r] = 1 % s.vocab;
  if (tokens.size() >= 3) {
    tokens[tokens.size() / 2] = -1;
    tokens.back() = s.vocab + 5;
  }
  return tokens;
}

// Rows of an out-of-range token are NaN (as the CPU's).
TEST_P(EmbeddingOps, ForwardIsTheCpusBits) {
  SCOPED_TRACE(seed_text());
  for (const EmbeddingShape s : {EmbeddingShape{1, 1, 1, 1}, EmbeddingShape{2, 7, 33, 11},
                                 EmbeddingShape{3, 5, 300, 50}, EmbeddingShape{0, 3, 4, 5}}) {
    SCOPED_TRACE("embedding forward " + s.text());
    const size_t channels = static_cast<size_t>(s.channels);
    const std::vector<int32_t> tokens = embedding_tokens(rng, s);
    const std::vector<lowp16> wte = fmt.random(rng, static_cast<size_t>(s.vocab) * channels),
                              wpe = fmt.random(rng, static_cast<size_t>(s.seq_len) * channels);
    std::vector<lowp16> want(s.rows() * channels);
    cpu::embedding_forward(precision(), pool, tokens.data(), wte.data(), wpe.data(), s.batch, s.seq_len, s.channels,
                           s.vocab, want.data());
    DeviceArray<int32_t> d_tokens(tokens);
    DeviceArray<lowp16> d_wte(wte), d_wpe(wpe), d_out(LowpFormat::poison(want.size()));
    launch_embedding_forward_lowp(nullptr, precision(), d_tokens.get(), d_wte.get(), d_wpe.get(), s.batch, s.seq_len,
                                  s.channels, s.vocab, d_out.get());
    expect_same_bits(fmt, d_out.download(), want, "out");
  }
}

// Written (outputs poisoned; table rows of absent tokens become 0) and
// accumulated. Shapes: one row; channels under a warp, past one and past a
// block of 256 (the table kernel's block loops); 300 rows (the row index
// over two blocks, a run of 100 equal tokens); no rows at all (the table is
// zeroed or left, the positions 0 or left).
TEST_P(EmbeddingOps, BackwardIsTheCpusBits) {
  SCOPED_TRACE(seed_text());
  for (const EmbeddingShape s :
       {EmbeddingShape{1, 1, 1, 1}, EmbeddingShape{2, 7, 33, 11}, EmbeddingShape{3, 100, 5, 20},
        EmbeddingShape{2, 5, 300, 7}, EmbeddingShape{0, 4, 3, 5}}) {
    const size_t channels = static_cast<size_t>(s.channels);
    const size_t table = static_cast<size_t>(s.vocab) * channels, positions = static_cast<size_t>(s.seq_len) * channels;
    const std::vector<int32_t> tokens = embedding_tokens(rng, s);
    const std::vector<lowp16> dout = fmt.random(rng, s.rows() * channels);
    const std::vector<lowp16> prev_wte = fmt.random(rng, table), prev_wpe = fmt.random(rng, positions);
    DeviceArray<int32_t> d_tokens(tokens);
    DeviceArray<lowp16> d_dout(dout);
    DeviceArray<char> scratch(embedding_backward_scratch_bytes(static_cast<int>(s.rows())));
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE("embedding backward " + s.text() + (accumulate ? " accumulate" : ""));
      std::vector<lowp16> want_wte = accumulate ? prev_wte : LowpFormat::poison(table);
      std::vector<lowp16> want_wpe = accumulate ? prev_wpe : LowpFormat::poison(positions);
      DeviceArray<lowp16> d_wte(want_wte), d_wpe(want_wpe);
      cpu::TransformerScratch cpu_scratch;
      cpu::embedding_backward(precision(), pool, cpu_scratch, tokens.data(), dout.data(), s.batch, s.seq_len,
                              s.channels, s.vocab, want_wte.data(), want_wpe.data(), accumulate);
      launch_embedding_backward_lowp(nullptr, precision(), d_tokens.get(), d_dout.get(), s.batch, s.seq_len, s.channels,
                                     s.vocab, d_wte.get(), d_wpe.get(), accumulate, scratch.get());
      expect_same_bits(fmt, d_wte.download(), want_wte, "d_wte");
      expect_same_bits(fmt, d_wpe.download(), want_wpe, "d_wpe");
    }
  }
}

TEST_P(EmbeddingOps, NegativeShapesAreRefused) {
  DeviceArray<int32_t> tokens(1);
  DeviceArray<lowp16> d(1);
  EXPECT_THROW(
      launch_embedding_forward_lowp(nullptr, precision(), tokens.get(), d.get(), d.get(), 1, 1, -1, 1, d.get()), Error);
  EXPECT_THROW(launch_embedding_backward_lowp(nullptr, precision(), tokens.get(), d.get(), -1, 1, 1, 1, d.get(),
                                              d.get(), false, nullptr),
               Error);
}

// batch * seq_len rows past INT_MAX: refused by name before anything is
// read or written (the product was an int).
TEST_P(EmbeddingOps, BackwardRefusesMoreRowsThanAnInt) {
  DeviceArray<int32_t> tokens(1);
  DeviceArray<lowp16> d(1);
  try {
    launch_embedding_backward_lowp(nullptr, precision(), tokens.get(), d.get(), 65536, 65536, 1, 1, d.get(), d.get(),
                                   false, nullptr);
    ADD_FAILURE() << "65536 x 65536 rows were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch * seq_len past INT_MAX"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, EmbeddingOps, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
