// test_embedding.cpp: the token + position embedding ops (kernels/ops/
// embedding.h), FP16 and BF16: the CPU rows against plain loops, and the
// CUDA rows (the forward; the backward's row index, table gradient over
// runs of equal tokens after the stable sort, and position gradient)
// against the CPU rows (op_test_support.h).
//
// Tolerance: bitwise (tests/cuda/transformer_compare_support.h). The
// forward is one FP32 add of two 16-bit values; the backward adds each
// token's rows in increasing row order and each position's rows in
// increasing batch index on both sides, one rounding.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class Embedding : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

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

EmbeddingForward forward_op(const int32_t* tokens, const lowp16* wte, const lowp16* wpe, const EmbeddingShape& s,
                            lowp16* out) {
  EmbeddingForward op;
  op.tokens = tokens;
  op.wte = wte;
  op.wpe = wpe;
  op.batch = s.batch;
  op.seq_len = s.seq_len;
  op.channels = s.channels;
  op.vocab = s.vocab;
  op.out = out;
  return op;
}

EmbeddingBackward backward_op(const int32_t* tokens, const lowp16* dout, const EmbeddingShape& s, lowp16* d_wte,
                              lowp16* d_wpe, bool accumulate) {
  EmbeddingBackward op;
  op.tokens = tokens;
  op.dout = dout;
  op.batch = s.batch;
  op.seq_len = s.seq_len;
  op.channels = s.channels;
  op.vocab = s.vocab;
  op.d_wte = d_wte;
  op.d_wpe = d_wpe;
  op.accumulate = accumulate;
  return op;
}

// The CPU rows against the header's formulas as plain loops: the same FP32
// adds in the same order (each token's rows in increasing r, each
// position's in increasing b), so the same bits. Shapes: one row; out-of-
// range tokens; enough rows and channels (past 2^15 words) for CpuBackend
// to split each pass over its threads.
TEST_P(Embedding, CpuRowsAreThePlainLoopsSums) {
  SCOPED_TRACE(seed_text());
  for (const EmbeddingShape s :
       {EmbeddingShape{1, 1, 1, 1}, EmbeddingShape{2, 7, 33, 11}, EmbeddingShape{4, 65, 130, 50}}) {
    const size_t channels = static_cast<size_t>(s.channels), rows = s.rows(), seq_len = static_cast<size_t>(s.seq_len);
    const size_t table = static_cast<size_t>(s.vocab) * channels, positions = seq_len * channels;
    const std::vector<int32_t> tokens = embedding_tokens(rng, s);
    const std::vector<lowp16> wte = fmt.random(rng, table), wpe = fmt.random(rng, positions);
    {
      SCOPED_TRACE("embedding forward " + s.text());
      std::vector<lowp16> want(rows * channels), out = LowpFormat::poison(rows * channels);
      for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < channels; ++c) {
          const int32_t token = tokens[r];
          want[r * channels + c] = token >= 0 && token < s.vocab
                                       ? fmt.narrow(fmt.widen(wte[static_cast<size_t>(token) * channels + c]) +
                                                    fmt.widen(wpe[(r % seq_len) * channels + c]))
                                       : fmt.narrow(NAN);
        }
      embedding_forward_lowp(cpu, forward_op(tokens.data(), wte.data(), wpe.data(), s, out.data()));
      expect_same_bits(fmt, out, want, "out");
    }
    const std::vector<lowp16> dout = fmt.random(rng, rows * channels);
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE("embedding backward " + s.text() + (accumulate ? " accumulate" : ""));
      std::vector<float> sum_wte(table, 0.0f), sum_wpe(positions, 0.0f);
      if (accumulate) {
        sum_wte = fmt.widened(wte);
        sum_wpe = fmt.widened(wpe);
      }
      for (size_t r = 0; r < rows; ++r) {
        if (tokens[r] < 0 || tokens[r] >= s.vocab) continue;
        for (size_t c = 0; c < channels; ++c)
          sum_wte[static_cast<size_t>(tokens[r]) * channels + c] += fmt.widen(dout[r * channels + c]);
      }
      for (size_t t = 0; t < seq_len; ++t)
        for (int b = 0; b < s.batch; ++b)
          for (size_t c = 0; c < channels; ++c)
            sum_wpe[t * channels + c] += fmt.widen(dout[(static_cast<size_t>(b) * seq_len + t) * channels + c]);
      std::vector<lowp16> want_wte(table), want_wpe(positions);
      for (size_t i = 0; i < table; ++i) want_wte[i] = fmt.narrow(sum_wte[i]);
      for (size_t i = 0; i < positions; ++i) want_wpe[i] = fmt.narrow(sum_wpe[i]);
      std::vector<lowp16> d_wte = accumulate ? wte : LowpFormat::poison(table);
      std::vector<lowp16> d_wpe = accumulate ? wpe : LowpFormat::poison(positions);
      embedding_backward_lowp(cpu, backward_op(tokens.data(), dout.data(), s, d_wte.data(), d_wpe.data(), accumulate));
      expect_same_bits(fmt, d_wte, want_wte, "d_wte");
      expect_same_bits(fmt, d_wpe, want_wpe, "d_wpe");
    }
  }
}

// Rows of an out-of-range token are NaN (as the CPU's).
TEST_P(Embedding, ForwardIsTheCpusBits) {
  SCOPED_TRACE(seed_text());
  for (const EmbeddingShape s : {EmbeddingShape{1, 1, 1, 1}, EmbeddingShape{2, 7, 33, 11},
                                 EmbeddingShape{3, 5, 300, 50}, EmbeddingShape{0, 3, 4, 5}}) {
    SCOPED_TRACE("embedding forward " + s.text());
    const size_t channels = static_cast<size_t>(s.channels);
    const std::vector<int32_t> tokens = embedding_tokens(rng, s);
    const std::vector<lowp16> wte = fmt.random(rng, static_cast<size_t>(s.vocab) * channels),
                              wpe = fmt.random(rng, static_cast<size_t>(s.seq_len) * channels);
    std::vector<lowp16> want(s.rows() * channels);
    embedding_forward_lowp(cpu, forward_op(tokens.data(), wte.data(), wpe.data(), s, want.data()));
    DeviceArray<int32_t> d_tokens(tokens);
    DeviceArray<lowp16> d_wte(wte), d_wpe(wpe), d_out(LowpFormat::poison(want.size()));
    embedding_forward_lowp_cuda(cuda, forward_op(d_tokens.get(), d_wte.get(), d_wpe.get(), s, d_out.get()));
    expect_same_bits(fmt, d_out.download(), want, "out");
  }
}

// Written (outputs poisoned; table rows of absent tokens become 0) and
// accumulated. Shapes: one row; channels under a warp, past one and past a
// block of 256 (the table kernel's block loops); 300 rows (the row index
// over two blocks, a run of 100 equal tokens); no rows at all (the table is
// zeroed or left, the positions 0 or left).
TEST_P(Embedding, BackwardIsTheCpusBits) {
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
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE("embedding backward " + s.text() + (accumulate ? " accumulate" : ""));
      std::vector<lowp16> want_wte = accumulate ? prev_wte : LowpFormat::poison(table);
      std::vector<lowp16> want_wpe = accumulate ? prev_wpe : LowpFormat::poison(positions);
      DeviceArray<lowp16> d_wte(want_wte), d_wpe(want_wpe);
      embedding_backward_lowp(cpu,
                              backward_op(tokens.data(), dout.data(), s, want_wte.data(), want_wpe.data(), accumulate));
      embedding_backward_lowp_cuda(cuda,
                                   backward_op(d_tokens.get(), d_dout.get(), s, d_wte.get(), d_wpe.get(), accumulate));
      expect_same_bits(fmt, d_wte.download(), want_wte, "d_wte");
      expect_same_bits(fmt, d_wpe.download(), want_wpe, "d_wpe");
    }
  }
}

TEST_P(Embedding, NegativeShapesAreRefused) {
  DeviceArray<int32_t> tokens(1);
  DeviceArray<lowp16> d(1);
  EXPECT_THROW(embedding_forward_lowp_cuda(cuda, forward_op(tokens.get(), d.get(), d.get(), {1, 1, -1, 1}, d.get())),
               Error);
  EXPECT_THROW(
      embedding_backward_lowp_cuda(cuda, backward_op(tokens.get(), d.get(), {-1, 1, 1, 1}, d.get(), d.get(), false)),
      Error);
  std::vector<int32_t> host_tokens(1);
  std::vector<lowp16> h(1);
  EXPECT_THROW(embedding_forward_lowp(cpu, forward_op(host_tokens.data(), h.data(), h.data(), {1, 1, -1, 1}, h.data())),
               Error);
  EXPECT_THROW(
      embedding_backward_lowp(cpu, backward_op(host_tokens.data(), h.data(), {-1, 1, 1, 1}, h.data(), h.data(), false)),
      Error);
}

// batch * seq_len rows past INT_MAX: refused by name before anything is
// read or written (the product was an int).
TEST_P(Embedding, BackwardRefusesMoreRowsThanAnInt) {
  DeviceArray<int32_t> tokens(1);
  DeviceArray<lowp16> d(1);
  try {
    embedding_backward_lowp_cuda(cuda,
                                 backward_op(tokens.get(), d.get(), {65536, 65536, 1, 1}, d.get(), d.get(), false));
    ADD_FAILURE() << "65536 x 65536 rows were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch * seq_len past INT_MAX"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, Embedding, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
