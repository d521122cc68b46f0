// test_head_layout.cpp: the head permutes (kernels/ops/head_layout.h),
// FP16 and BF16: the CPU rows against plain index loops, and the CUDA rows
// against the CPU rows (op_test_support.h). Copies: bitwise
// (tests/cuda/transformer_compare_support.h).
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/head_layout.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

class HeadLayout : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

struct PermuteShape {
  int batch, seq_len, heads, head_size;
  std::string text() const {
    return "B=" + std::to_string(batch) + " T=" + std::to_string(seq_len) + " nh=" + std::to_string(heads) +
           " hs=" + std::to_string(head_size);
  }
};

RowsToHeads rows_to_heads_op(const lowp16* rows, int row_stride, const PermuteShape& s, lowp16* heads_out) {
  RowsToHeads op;
  op.rows = rows;
  op.row_stride = row_stride;
  op.batch = s.batch;
  op.seq_len = s.seq_len;
  op.heads = s.heads;
  op.head_size = s.head_size;
  op.heads_out = heads_out;
  return op;
}

HeadsToRows heads_to_rows_op(const lowp16* heads_in, const PermuteShape& s, lowp16* rows, int row_stride) {
  HeadsToRows op;
  op.heads_in = heads_in;
  op.batch = s.batch;
  op.seq_len = s.seq_len;
  op.heads = s.heads;
  op.head_size = s.head_size;
  op.rows = rows;
  op.row_stride = row_stride;
  return op;
}

// The CPU rows against the header's formula, index by index: heads[b, h,
// t, d] = rows[(b*T + t) * row_stride + h*hs + d], and back into a
// poisoned buffer of which only the columns read are written. Shapes: one
// element; rows of 3C + 1 as the attention block's qkv (q at offset C);
// enough (b, h, t) rows (past 2^15 words) for CpuBackend to split the pass
// over its threads.
TEST_P(HeadLayout, CpuRowsAreThePlainLoopsCopies) {
  SCOPED_TRACE(seed_text());
  for (const PermuteShape s : {PermuteShape{1, 1, 1, 1}, PermuteShape{2, 5, 3, 7}, PermuteShape{4, 65, 4, 32}}) {
    SCOPED_TRACE("permutes " + s.text());
    const int c = s.heads * s.head_size, stride = 3 * c + 1;
    const size_t rows = static_cast<size_t>(s.batch) * s.seq_len;
    const std::vector<lowp16> qkv = fmt.random(rng, rows * stride);
    std::vector<lowp16> want(rows * c), want_back = LowpFormat::poison(rows * stride);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int t = 0; t < s.seq_len; ++t)
          for (int d = 0; d < s.head_size; ++d) {
            const size_t head_at = ((static_cast<size_t>(b) * s.heads + h) * s.seq_len + t) * s.head_size + d;
            const size_t row_at = (static_cast<size_t>(b) * s.seq_len + t) * stride + c + h * s.head_size + d;
            want[head_at] = qkv[row_at];
            want_back[row_at] = qkv[row_at];
          }
    std::vector<lowp16> heads = LowpFormat::poison(rows * c), back = LowpFormat::poison(rows * stride);
    rows_to_heads_lowp(cpu, rows_to_heads_op(qkv.data() + c, stride, s, heads.data()));
    expect_same_bits(fmt, heads, want, "rows_to_heads");
    heads_to_rows_lowp(cpu, heads_to_rows_op(heads.data(), s, back.data() + c, stride));
    size_t differs = 0;
    for (size_t i = 0; i < back.size(); ++i) differs += back[i].bits != want_back[i].bits;
    EXPECT_EQ(differs, 0u) << "heads_to_rows: words other than the loop's (poison included)";
  }
}

// As the attention block calls them: q, k and v read out of one qkv row of
// 3C (+ a gap column) at offsets 0, C, 2C, and merged back into a poisoned
// qkv-like buffer; the gap columns are never written.
TEST_P(HeadLayout, RowsToHeadsAndHeadsToRowsAreTheCpusCopies) {
  SCOPED_TRACE(seed_text());
  for (const PermuteShape s :
       {PermuteShape{1, 1, 1, 1}, PermuteShape{2, 5, 3, 7}, PermuteShape{3, 37, 4, 24}, PermuteShape{0, 4, 2, 3}}) {
    SCOPED_TRACE("permutes " + s.text());
    const int c = s.heads * s.head_size, stride = 3 * c + 1;
    const size_t rows = static_cast<size_t>(s.batch) * s.seq_len;
    const size_t heads_count = rows * c;
    const std::vector<lowp16> qkv = fmt.random(rng, rows * stride);
    DeviceArray<lowp16> d_qkv(qkv), d_back(LowpFormat::poison(rows * stride));
    std::vector<lowp16> want_back = LowpFormat::poison(rows * stride);
    for (int part = 0; part < 3; ++part) {
      const size_t offset = static_cast<size_t>(part) * c;
      std::vector<lowp16> want(heads_count);
      rows_to_heads_lowp(cpu, rows_to_heads_op(qkv.data() + offset, stride, s, want.data()));
      DeviceArray<lowp16> d_heads(LowpFormat::poison(heads_count));
      rows_to_heads_lowp_cuda(cuda, rows_to_heads_op(d_qkv.get() + offset, stride, s, d_heads.get()));
      expect_same_bits(fmt, d_heads.download(), want, "rows_to_heads part " + std::to_string(part));
      heads_to_rows_lowp(cpu, heads_to_rows_op(want.data(), s, want_back.data() + offset, stride));
      heads_to_rows_lowp_cuda(cuda, heads_to_rows_op(d_heads.get(), s, d_back.get() + offset, stride));
    }
    const std::vector<lowp16> back = d_back.download();
    expect_same_bits(fmt, back, want_back, "heads_to_rows");
    size_t gap_written = 0, differs = 0;
    for (size_t i = 0; i < back.size(); ++i) {
      if (i % stride == static_cast<size_t>(3 * c))
        gap_written += back[i].bits != kPoisonHalfBits;
      else
        differs += back[i].bits != qkv[i].bits;
    }
    EXPECT_EQ(gap_written, 0u) << "a column past 3C was written";
    EXPECT_EQ(differs, 0u) << "the merge of the split is not the identity";
  }
}

TEST_P(HeadLayout, PermutesRefuseAStrideNarrowerThanTheHeads) {
  const PermuteShape s{1, 2, 2, 3};
  DeviceArray<lowp16> d(64);
  EXPECT_THROW(rows_to_heads_lowp_cuda(cuda, rows_to_heads_op(d.get(), 5, s, d.get())), Error);
  EXPECT_THROW(heads_to_rows_lowp_cuda(cuda, heads_to_rows_op(d.get(), s, d.get(), 5)), Error);
  std::vector<lowp16> h(64);
  EXPECT_THROW(rows_to_heads_lowp(cpu, rows_to_heads_op(h.data(), 5, s, h.data())), Error);
  EXPECT_THROW(heads_to_rows_lowp(cpu, heads_to_rows_op(h.data(), s, h.data(), 5)), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, HeadLayout, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
