// test_attention_decode.cpp: the attention of new positions against cached
// keys and values (kernels/ops/attention_decode.h): the CUDA row (one warp
// per (new position, head)) against the CPU row, FP16 and BF16
// (op_test_support.h). The CPU row itself is held to a double reference
// with the same rounding points, and to the full path's operations, in
// tests/kernels/cpu/test_cpu_attention_decode.cpp.
//
// Tolerance (tests/cuda/attention_compare_support.h's rules): the scores
// are the same FMA chains on both sides, the rounded probabilities may
// differ by an ulp of the format, which moves sum_j p_j v_j by at most
// fmt.rel_tol() max_j |v_j|: that, plus fmt.rel_tol() relative and 2^-24.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/ops/attention_decode.h"
#include "kernels/ops/op_test_support.h"
#include "support/test_cuda_op_context.h"

namespace ddp::test {
namespace {

// The op's struct, by another name: the suite's fixture takes its name here.
using DecodeOp = ddp::AttentionDecode;

class AttentionDecode : public OpTest {
 protected:
  CpuBackend cpu{2, precision()};
  TestCudaOpContext cuda{precision()};
};

constexpr double kSubnormalStep = 6e-8;  // 2^-24

struct DecodeShape {
  int heads, head_size, past_len, new_len;
  std::string text() const {
    return "nh=" + std::to_string(heads) + " hs=" + std::to_string(head_size) + " past=" + std::to_string(past_len) +
           " new=" + std::to_string(new_len);
  }
};

DecodeOp decode_op(const lowp16* q, int q_stride, const lowp16* k_cache, const lowp16* v_cache, int kv_stride,
                   int heads, int head_size, int past_len, int new_len, float scale, lowp16* out, int out_stride) {
  DecodeOp op;
  op.q = q;
  op.q_stride = q_stride;
  op.k_cache = k_cache;
  op.v_cache = v_cache;
  op.kv_stride = kv_stride;
  op.heads = heads;
  op.head_size = head_size;
  op.past_len = past_len;
  op.new_len = new_len;
  op.scale = scale;
  op.out = out;
  op.out_stride = out_stride;
  return op;
}

// As the decoder calls it (attention_compare_support.h): q inside a
// qkv-like row (stride 3C + 1), caches with a row gap, the output's gap
// columns poisoned and left so, cache rows past the visible ones NaN (never
// read). Shapes: one position of head size 1; visible lengths inside a
// warp, past 32 and past 256 (a lane's several scores); head sizes past 32
// (a lane's several outputs), odd.
TEST_P(AttentionDecode, MatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  for (const DecodeShape s : {DecodeShape{1, 1, 0, 1}, DecodeShape{3, 17, 5, 2}, DecodeShape{2, 33, 40, 3},
                              DecodeShape{1, 8, 290, 1}, DecodeShape{2, 70, 0, 4}}) {
    SCOPED_TRACE("attention decode " + s.text());
    const int c = s.heads * s.head_size;
    const int q_stride = 3 * c + 1, kv_stride = c + 3, out_stride = c + 2;
    const int positions = s.past_len + s.new_len, capacity = positions + 4;
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_size));
    const std::vector<lowp16> q = fmt.random(rng, static_cast<size_t>(s.new_len) * q_stride, -2.0f, 2.0f);
    std::vector<lowp16> k = fmt.random(rng, static_cast<size_t>(capacity) * kv_stride, -2.0f, 2.0f);
    std::vector<lowp16> v = fmt.random(rng, k.size());
    for (size_t i = static_cast<size_t>(positions) * kv_stride; i < k.size(); ++i) k[i] = v[i] = lowp16{fmt.nan_bits()};
    const size_t out_count = static_cast<size_t>(s.new_len) * out_stride;
    std::vector<lowp16> want = LowpFormat::poison(out_count);
    attention_decode_lowp(cpu, decode_op(q.data(), q_stride, k.data(), v.data(), kv_stride, s.heads, s.head_size,
                                         s.past_len, s.new_len, scale, want.data(), out_stride));
    DeviceArray<lowp16> d_q(q), d_k(k), d_v(v), d_out(LowpFormat::poison(out_count));
    attention_decode_lowp_cuda(cuda, decode_op(d_q.get(), q_stride, d_k.get(), d_v.get(), kv_stride, s.heads,
                                               s.head_size, s.past_len, s.new_len, scale, d_out.get(), out_stride));
    std::vector<lowp16> got = d_out.download();
    std::vector<double> v_max(out_count, 0.0);
    size_t gap_written = 0;
    for (int i = 0; i < s.new_len; ++i)
      for (int col = 0; col < out_stride; ++col) {
        const size_t at = static_cast<size_t>(i) * out_stride + col;
        if (col >= c) {
          gap_written += got[at].bits != kPoisonHalfBits;
          got[at] = want[at] = lowp16{0};  // compared above
          continue;
        }
        for (int j = 0; j <= s.past_len + i; ++j)
          v_max[at] = std::max(v_max[at], std::fabs(double{fmt.widen(v[static_cast<size_t>(j) * kv_stride + col])}));
      }
    EXPECT_EQ(gap_written, 0u) << "the output's columns past heads * head_size must stay as they were";
    std::vector<double> floor(out_count);
    for (size_t i = 0; i < out_count; ++i) floor[i] = fmt.rel_tol() * v_max[i] + kSubnormalStep;
    expect_close_each(fmt, got, want, fmt.rel_tol(), floor, "attention decode");
  }
}

// More positions than a block's 48 KB of FP32 scores: refused before any
// launch; strides narrower than the heads too.
TEST_P(AttentionDecode, RefusesMorePositionsThanSharedMemoryHolds) {
  DeviceArray<lowp16> d(LowpFormat::poison(8));
  const int max_positions = attention_decode_max_positions();
  try {
    attention_decode_lowp_cuda(cuda,
                               decode_op(d.get(), 1, d.get(), d.get(), 1, 1, 1, max_positions, 1, 1.0f, d.get(), 1));
    FAIL() << max_positions + 1 << " positions were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      attention_decode_lowp_cuda(cuda, decode_op(d.get(), 1, d.get(), d.get(), 2, 1, 2, 0, 1, 1.0f, d.get(), 2)),
      Error);
  for (const lowp16 x : d.download()) EXPECT_EQ(x.bits, kPoisonHalfBits);
}

INSTANTIATE_TEST_SUITE_P(Precisions, AttentionDecode, ::testing::ValuesIn(kBothPrecisions), precision_test_name);

}  // namespace
}  // namespace ddp::test
