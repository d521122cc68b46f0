// test_cpu_attention_decode.cpp: CpuBackend's attention of new positions
// against cached keys and values (attention_decode_lowp, the decoder's),
// on fresh random inputs with its outputs poisoned first:
// - against the full path's operations on the same rows (rows_to_heads, the
//   batched q k^T GEMM, the causal softmax, the P v GEMM, heads_to_rows):
//   every new position's output is the full window's at that position. The
//   two differ only in the FP32 sums' order inside the GEMMs (an FMA chain
//   here, OpenBLAS's kernel there); one FP16 ulp of a probability moves an
//   output by at most 2^-11 max_j |v_j|, so we allow 2^-10 max_j |v_j| plus
//   fmt.rel_tol() and a subnormal step, and report the bitwise count;
// - against a double reference with the same rounding points (scores and
//   probabilities rounded to FP16): a score whose FP32 and double sums round
//   to neighbouring FP16 values moves its probability by up to 2^-11
//   |scale * s| relative, so we allow 2^-7 max_j |v_j| (|scale * s| <= 4
//   here) plus fmt.rel_tol(): loose, but a wrong mask, offset or stride is
//   off by O(max |v|);
// - one thread against two: bitwise (each (query, head) on one thread).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/attention_decode.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/head_layout.h"

namespace ddp {
namespace {

using namespace test;

// A window of T positions in the decoder's layout: qkv [T, 3C] rows, and
// the caches [T, C] holding its k and v columns.
struct Window {
  LowpFormat fmt;
  int heads, head_size, t;
  std::vector<lowp16> qkv, k_cache, v_cache;
  int c() const { return heads * head_size; }
  Window(const LowpFormat& format, std::mt19937_64& rng, int nh, int hs, int positions, float range)
      : fmt(format), heads(nh), head_size(hs), t(positions) {
    qkv = fmt.random(rng, static_cast<size_t>(t) * 3 * c(), -range, range);
    for (int r = 0; r < t; ++r)
      for (int col = 0; col < c(); ++col) {
        k_cache.push_back(qkv[static_cast<size_t>(r) * 3 * c() + c() + col]);
        v_cache.push_back(qkv[static_cast<size_t>(r) * 3 * c() + 2 * c() + col]);
      }
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_size)); }
  // max_j<=visible-1 |v_j[col]|: the scale of an output's error.
  double v_max(int visible, int col) const {
    double m = 0.0;
    for (int j = 0; j < visible; ++j)
      m = std::max(m, std::fabs(double{fmt.widen(v_cache[static_cast<size_t>(j) * c() + col])}));
    return m;
  }
};

// The decoder's call: positions past.. of the window, out [T - past, C].
std::vector<lowp16> decode(Backend& be, const Window& w, int past) {
  const int c = w.c(), new_len = w.t - past;
  Buffer<lowp16> q(be, static_cast<size_t>(new_len) * 3 * c);
  q.upload(w.qkv.data() + static_cast<size_t>(past) * 3 * c, q.count());
  Buffer<lowp16> k(be, w.k_cache.size()), v(be, w.v_cache.size()), out(be, static_cast<size_t>(new_len) * c);
  k.upload(w.k_cache);
  v.upload(w.v_cache);
  out.upload(LowpFormat::poison(out.count()));
  AttentionDecode attention;
  attention.q = q.data();
  attention.q_stride = 3 * c;
  attention.k_cache = k.data();
  attention.v_cache = v.data();
  attention.kv_stride = c;
  attention.heads = w.heads;
  attention.head_size = w.head_size;
  attention.past_len = past;
  attention.new_len = new_len;
  attention.scale = w.scale();
  attention.out = out.data();
  attention.out_stride = c;
  attention_decode_lowp(be, attention);
  return out.download();
}

// CausalSelfAttention::heads_forward's operations on the whole window: y [T, C].
std::vector<lowp16> full_path(Backend& be, const Window& w) {
  const int c = w.c(), t = w.t, nh = w.heads, hs = w.head_size;
  Buffer<lowp16> qkv(be, w.qkv.size()), q(be, static_cast<size_t>(t) * c), k(be, q.count()), v(be, q.count());
  Buffer<lowp16> probs(be, static_cast<size_t>(nh) * t * t), heads(be, q.count()), y(be, q.count());
  qkv.upload(w.qkv);
  y.upload(LowpFormat::poison(y.count()));
  RowsToHeads split;
  split.row_stride = 3 * c;
  split.batch = 1;
  split.seq_len = t;
  split.heads = nh;
  split.head_size = hs;
  split.rows = qkv.data();
  split.heads_out = q.data();
  rows_to_heads_lowp(be, split);
  split.rows = qkv.data() + c;
  split.heads_out = k.data();
  rows_to_heads_lowp(be, split);
  split.rows = qkv.data() + 2 * c;
  split.heads_out = v.data();
  rows_to_heads_lowp(be, split);
  const int64_t th = static_cast<int64_t>(t) * hs, tt = static_cast<int64_t>(t) * t;
  GemmBatchedLowp scores;
  scores.gemm.trans_b = Transpose::Yes;
  scores.gemm.m = t;
  scores.gemm.n = t;
  scores.gemm.k = hs;
  scores.gemm.a = q.data();
  scores.gemm.lda = hs;
  scores.gemm.b = k.data();
  scores.gemm.ldb = hs;
  scores.gemm.c = probs.data();
  scores.gemm.ldc = t;
  scores.batch_count = nh;
  scores.stride_a = th;
  scores.stride_b = th;
  scores.stride_c = tt;
  gemm_batched_lowp(be, scores);
  CausalSoftmaxForward softmax;
  softmax.scores = probs.data();
  softmax.batch_heads = nh;
  softmax.seq_len = t;
  softmax.scale = w.scale();
  softmax.probs = probs.data();
  causal_softmax_forward_lowp(be, softmax);
  GemmBatchedLowp pv;
  pv.gemm.m = t;
  pv.gemm.n = hs;
  pv.gemm.k = t;
  pv.gemm.a = probs.data();
  pv.gemm.lda = t;
  pv.gemm.b = v.data();
  pv.gemm.ldb = hs;
  pv.gemm.c = heads.data();
  pv.gemm.ldc = hs;
  pv.batch_count = nh;
  pv.stride_a = tt;
  pv.stride_b = th;
  pv.stride_c = th;
  gemm_batched_lowp(be, pv);
  HeadsToRows merge;
  merge.heads_in = heads.data();
  merge.batch = 1;
  merge.seq_len = t;
  merge.heads = nh;
  merge.head_size = hs;
  merge.rows = y.data();
  merge.row_stride = c;
  heads_to_rows_lowp(be, merge);
  return y.download();
}

// In double from the same FP16 inputs, rounding the scores and the
// probabilities to FP16 where the kernel does.
std::vector<double> reference(const Window& w, int past) {
  const LowpFormat& fmt = w.fmt;
  const int c = w.c(), hs = w.head_size;
  std::vector<double> out;
  for (int i = past; i < w.t; ++i)
    for (int h = 0; h < w.heads; ++h) {
      std::vector<double> p(static_cast<size_t>(i) + 1);
      double max_s = -INFINITY;
      for (int j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (int d = 0; d < hs; ++d)
          dot += double{fmt.widen(w.qkv[static_cast<size_t>(i) * 3 * c + h * hs + d])} *
                 fmt.widen(w.k_cache[static_cast<size_t>(j) * c + h * hs + d]);
        p[j] = w.scale() * double{fmt.widen(fmt.narrow(static_cast<float>(dot)))};
        max_s = std::max(max_s, p[j]);
      }
      double sum = 0.0;
      for (double& e : p) sum += (e = std::exp(e - max_s));
      for (double& e : p) e = fmt.widen(fmt.narrow(static_cast<float>(e / sum)));
      for (int d = 0; d < hs; ++d) {
        double acc = 0.0;
        for (int j = 0; j <= i; ++j) acc += p[j] * fmt.widen(w.v_cache[static_cast<size_t>(j) * c + h * hs + d]);
        out.push_back(acc);
      }
    }
  return out;  // [(i - past) * C + h * hs + d]: heads are contiguous column blocks, as the rows
}

TEST_P(CpuLowpKernels, AttentionDecodeIsTheFullPathsAttentionAtEachNewPosition) {
  size_t compared = 0, bitwise = 0;
  for (const int past : {0, 1, 17, 30, 31}) {
    for (const auto& shape : {std::pair<int, int>{2, 16}, std::pair<int, int>{3, 24}}) {
      SCOPED_TRACE("past " + std::to_string(past) + ", heads " + std::to_string(shape.first) + " x " +
                   std::to_string(shape.second));
      const Window w(fmt, rng, shape.first, shape.second, 32, 2.0f);
      const std::vector<lowp16> full = full_path(cpu, w), got = decode(cpu, w, past);
      const int c = w.c();
      size_t bad = 0;
      for (size_t at = 0; at < got.size(); ++at) {
        const int i = past + static_cast<int>(at) / c, col = static_cast<int>(at) % c;
        const lowp16 want = full[static_cast<size_t>(i) * c + col];
        ++compared;
        bitwise += got[at].bits == want.bits;
        const double tol = std::ldexp(w.v_max(i + 1, col), -10) + 6e-8;
        if (!close_enough(fmt.widen(got[at]), fmt.widen(want), fmt.rel_tol(), tol) && bad++ < 3)
          ADD_FAILURE() << "position " << i << " column " << col << ": decode " << fmt.widen(got[at]) << ", full "
                        << fmt.widen(want);
      }
    }
  }
  std::printf("[ decode   ] %zu of %zu outputs bitwise equal to the full path's\n", bitwise, compared);
}

TEST_P(CpuLowpKernels, AttentionDecodeMatchesDoubleWithTheSameRoundingPoints) {
  for (const int past : {0, 5, 12}) {
    SCOPED_TRACE("past " + std::to_string(past));
    const Window w(fmt, rng, 3, 16, 13, 1.0f);
    const std::vector<lowp16> got = decode(cpu, w, past);
    const std::vector<double> want = reference(w, past);
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    for (size_t at = 0; at < got.size(); ++at) {
      const int i = past + static_cast<int>(at) / w.c(), col = static_cast<int>(at) % w.c();
      const double tol = std::ldexp(w.v_max(i + 1, col), -7) + 6e-8;
      if (!close_enough(fmt.widen(got[at]), want[at], fmt.rel_tol(), tol) && bad++ < 3)
        ADD_FAILURE() << "position " << i << " column " << col << ": " << fmt.widen(got[at]) << " want " << want[at];
    }
  }
}

TEST_P(CpuLowpKernelsThreaded, AttentionDecodeIsBitwiseTheSameOnTwoThreads) {
  // 12 heads of 64 against 300 positions: above the split threshold.
  const Window w(fmt, rng, 12, 64, 300, 2.0f);
  for (const int past : {0, 299}) {
    const std::vector<lowp16> a = decode(one, w, past), b = decode(two, w, past);
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i].bits != b[i].bits;
    EXPECT_EQ(differ, 0u) << "past " << past;
  }
}

}  // namespace
}  // namespace ddp
