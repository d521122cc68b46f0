// embedding_cpu.cpp: the CPU rows of the token + position embeddings
// (embedding.h). Rows are widened to FP32 a row at a time (half_convert.h:
// F16C where the CPU has it) and rounded once. The gradients are split by
// tokens (d_wte) and by positions (d_wpe), so each sum runs over the rows
// in increasing order on one thread whatever the thread count.
#include "kernels/ops/embedding.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_elementwise.h"  // widen_lowp, narrow_fp32, add_lowp_range
#include "kernels/error.h"

namespace ddp {

namespace {

// The backward's sort of the rows by token, kept by the backend between
// calls (a training step allocates nothing once warm).
struct EmbeddingScratch {
  std::vector<int32_t> row_order;    // rows sorted by token, stable
  std::vector<int32_t> token_start;  // [vocab + 1] offsets into row_order
};

}  // namespace

void embedding_forward_lowp_cpu(CpuBackend& cpu, const EmbeddingForward& op) {
  const Precision p = cpu.precision();
  const int32_t* tokens = op.tokens;
  const int seq_len = op.seq_len, vocab = op.vocab;
  DDP_REQUIRE(op.batch >= 0 && seq_len >= 0 && op.channels >= 0 && vocab >= 0,
              "embedding_forward_lowp: negative shape");
  const size_t rows = count_of(op.batch) * count_of(seq_len), width = count_of(op.channels);
  cpu.parallel_rows(rows, width, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int32_t token = tokens[r];
      const lowp16* pos = op.wpe + (r % count_of(seq_len)) * width;
      lowp16* dst = op.out + r * width;
      if (token < 0 || token >= vocab) {
        std::fill(dst, dst + width,
                  with_codec(p, [](auto codec) { return codec.narrow(std::numeric_limits<float>::quiet_NaN()); }));
        continue;
      }
      cpu::add_lowp_range(p, op.wte + static_cast<size_t>(token) * width, pos, dst, width);
    }
  });
}

void embedding_backward_lowp_cpu(CpuBackend& cpu, const EmbeddingBackward& op) {
  const Precision p = cpu.precision();
  CpuThreadPool& pool = cpu.pool();
  const int32_t* tokens = op.tokens;
  const lowp16* dout = op.dout;
  const int batch = op.batch, seq_len = op.seq_len, vocab = op.vocab;
  const bool accumulate = op.accumulate;
  DDP_REQUIRE(batch >= 0 && seq_len >= 0 && op.channels >= 0 && vocab >= 0, "embedding_backward_lowp: negative shape");
  EmbeddingScratch& s = cpu.row_scratch<EmbeddingScratch>();
  const size_t rows = count_of(batch) * count_of(seq_len), width = count_of(op.channels), table = count_of(vocab);
  // A stable counting sort of the rows by token: each token's rows in
  // increasing order, so its sum runs in the order a sequential loop over
  // the rows would add them (and CUDA's stable radix sort gives the same).
  s.token_start.assign(table + 1, 0);
  for (size_t r = 0; r < rows; ++r)
    if (tokens[r] >= 0 && tokens[r] < vocab) ++s.token_start[static_cast<size_t>(tokens[r]) + 1];
  for (size_t v = 0; v < table; ++v) s.token_start[v + 1] += s.token_start[v];
  s.row_order.resize(static_cast<size_t>(s.token_start[table]));
  {
    std::vector<int32_t> next(s.token_start.begin(), s.token_start.end() - 1);
    for (size_t r = 0; r < rows; ++r)
      if (tokens[r] >= 0 && tokens[r] < vocab)
        s.row_order[static_cast<size_t>(next[tokens[r]]++)] = static_cast<int32_t>(r);
  }
  // d_wte by token ranges: each row of the table is one thread's.
  pool.parallel_for(table, 1, cpu_pass_pieces(rows * width + table * width, pool.size()), [&](size_t v0, size_t v1) {
    std::vector<float> sum(width), row(width);
    for (size_t v = v0; v < v1; ++v) {
      lowp16* dst = op.d_wte + v * width;
      const int32_t begin = s.token_start[v], end = s.token_start[v + 1];
      if (begin == end && accumulate) continue;  // nothing to add
      if (accumulate)
        cpu::widen_lowp(p, dst, sum.data(), width);
      else
        std::fill(sum.begin(), sum.end(), 0.0f);
      for (int32_t i = begin; i < end; ++i) {
        cpu::widen_lowp(p, dout + static_cast<size_t>(s.row_order[static_cast<size_t>(i)]) * width, row.data(), width);
        for (size_t c = 0; c < width; ++c) sum[c] += row[c];
      }
      cpu::narrow_fp32(p, sum.data(), dst, width);
    }
  });
  // d_wpe by positions: sum over the batch in increasing b.
  const size_t positions = count_of(seq_len);
  cpu.parallel_rows(positions, width * count_of(batch), [&](size_t t0, size_t t1) {
    std::vector<float> sum(width), row(width);
    for (size_t t = t0; t < t1; ++t) {
      lowp16* dst = op.d_wpe + t * width;
      if (accumulate)
        cpu::widen_lowp(p, dst, sum.data(), width);
      else
        std::fill(sum.begin(), sum.end(), 0.0f);
      for (size_t b = 0; b < count_of(batch); ++b) {
        cpu::widen_lowp(p, dout + (b * positions + t) * width, row.data(), width);
        for (size_t c = 0; c < width; ++c) sum[c] += row[c];
      }
      cpu::narrow_fp32(p, sum.data(), dst, width);
    }
  });
}

}  // namespace ddp
