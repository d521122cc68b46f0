// test_cpu_transformer_determinism.cpp: every GPT operation of CpuBackend
// gives the same bits run to run and whatever the thread count (one thread,
// two threads, the F16C loops off), on inputs large enough that the
// two-thread backend splits the pass. The reductions (LayerNorm's
// parameter sums, the embedding table's gradient, the loss mean) run in an
// order fixed by the shapes, so nothing here needs a tolerance.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/ops/causal_softmax.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/head_layout.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/softmax_xent.h"
#include "kernels/buffer.h"

namespace ddp {
namespace {

using namespace test;

// Bytes of every output of one run of an operation on `be`.
using RunOp = std::function<std::vector<uint16_t>(CpuBackend& be)>;

template <class T>
void append_bits(std::vector<uint16_t>& out, const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint16_t*>(v.data());
  out.insert(out.end(), p, p + v.size() * sizeof(T) / 2);
}

// Index of the first differing element, or -1 (gtest would print whole vectors).
long first_difference(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

TEST_P(CpuLowpKernelsThreaded, TransformerOperationsSameBitsAnyThreadCount) {
  const int B = 8, T = 64, C = 96, V = 50, nh = 4, hs = C / nh;
  const auto tokens = random_labels(rng, B * T, V);
  const auto x = fmt.random(rng, B * T * C, -2.0f, 3.0f), dy = fmt.random(rng, B * T * C);
  const auto wte = fmt.random(rng, V * C), wpe = fmt.random(rng, T * C);
  const auto gamma = fmt.random(rng, C, 0.5f, 1.5f), beta = fmt.random(rng, C);
  const auto scores = fmt.random(rng, B * nh * T * T, -6.0f, 6.0f), dprobs = fmt.random(rng, scores.size());
  const int xent_rows = 256, xent_cols = 192, xent_real = 150;
  const auto logits = fmt.random(rng, xent_rows * xent_cols, -4.0f, 4.0f);
  const auto labels = random_labels(rng, xent_rows, xent_real);

  const auto embedding = [&](CpuBackend& be) {
    Buffer<int32_t> tok(be, tokens.size());
    Buffer<lowp16> d_wte(be, wte.size()), d_wpe(be, wpe.size()), out(be, x.size()), d_dy(be, dy.size());
    tok.upload(tokens);
    d_wte.upload(wte);
    d_wpe.upload(wpe);
    d_dy.upload(dy);
    EmbeddingForward forward;
    forward.tokens = tok.data();
    forward.wte = d_wte.data();
    forward.wpe = d_wpe.data();
    forward.batch = B;
    forward.seq_len = T;
    forward.channels = C;
    forward.vocab = V;
    forward.out = out.data();
    embedding_forward_lowp(be, forward);
    std::vector<uint16_t> bits;
    append_bits(bits, out.download());
    EmbeddingBackward backward;
    backward.tokens = tok.data();
    backward.dout = d_dy.data();
    backward.batch = B;
    backward.seq_len = T;
    backward.channels = C;
    backward.vocab = V;
    backward.d_wte = d_wte.data();
    backward.d_wpe = d_wpe.data();
    for (bool accumulate : {false, true}) {
      backward.accumulate = accumulate;
      embedding_backward_lowp(be, backward);
      append_bits(bits, d_wte.download());
      append_bits(bits, d_wpe.download());
    }
    return bits;
  };
  const auto layernorm = [&](CpuBackend& be) {
    Buffer<lowp16> d_x(be, x.size()), g(be, C), b(be, C), y(be, x.size()), d_dy(be, dy.size()), dx(be, x.size()),
        dg(be, C), db(be, C);
    Buffer<float> mean(be, B * T), rstd(be, B * T);
    d_x.upload(x);
    g.upload(gamma);
    b.upload(beta);
    d_dy.upload(dy);
    LayerNormForward forward;
    forward.x = d_x.data();
    forward.gamma = g.data();
    forward.beta = b.data();
    forward.rows = B * T;
    forward.cols = C;
    forward.eps = kLayerNormEps;
    forward.y = y.data();
    forward.mean = mean.data();
    forward.rstd = rstd.data();
    layernorm_forward_lowp(be, forward);
    std::vector<uint16_t> bits;
    append_bits(bits, y.download());
    append_bits(bits, mean.download());
    append_bits(bits, rstd.download());
    dx.upload(x);
    LayerNormBackward backward;
    backward.dy = d_dy.data();
    backward.x = d_x.data();
    backward.gamma = g.data();
    backward.mean = mean.data();
    backward.rstd = rstd.data();
    backward.rows = B * T;
    backward.cols = C;
    backward.dx = dx.data();
    backward.dgamma = dg.data();
    backward.dbeta = db.data();
    for (bool accumulate : {false, true}) {
      backward.accumulate_dx = accumulate;
      backward.accumulate_params = accumulate;
      layernorm_backward_lowp(be, backward);
      append_bits(bits, dx.download());
      append_bits(bits, dg.download());
      append_bits(bits, db.download());
    }
    return bits;
  };
  const auto attention = [&](CpuBackend& be) {
    const int bh = B * nh;
    Buffer<lowp16> s(be, scores.size()), p(be, scores.size()), dp(be, scores.size()), ds(be, scores.size()),
        heads(be, B * nh * T * hs), out(be, B * nh * T * hs), rows(be, x.size());
    s.upload(scores);
    dp.upload(dprobs);
    rows.upload(x);
    CausalSoftmaxForward softmax;
    softmax.scores = s.data();
    softmax.batch_heads = bh;
    softmax.seq_len = T;
    softmax.scale = 0.2f;
    softmax.probs = p.data();
    causal_softmax_forward_lowp(be, softmax);
    CausalSoftmaxBackward softmax_grad;
    softmax_grad.probs = p.data();
    softmax_grad.dprobs = dp.data();
    softmax_grad.batch_heads = bh;
    softmax_grad.seq_len = T;
    softmax_grad.scale = 0.2f;
    softmax_grad.dscores = ds.data();
    causal_softmax_backward_lowp(be, softmax_grad);
    RowsToHeads split;
    split.rows = rows.data();
    split.row_stride = C;
    split.batch = B;
    split.seq_len = T;
    split.heads = nh;
    split.head_size = hs;
    split.heads_out = heads.data();
    rows_to_heads_lowp(be, split);
    GemmBatchedLowp pv;  // (P V) per head: [T, T] x [T, hs]
    GemmLowp& g = pv.gemm;
    g.m = T;
    g.n = hs;
    g.k = T;
    g.a = p.data();
    g.lda = T;
    g.b = heads.data();
    g.ldb = hs;
    g.c = out.data();
    g.ldc = hs;
    pv.batch_count = bh;
    pv.stride_a = static_cast<int64_t>(T) * T;
    pv.stride_b = static_cast<int64_t>(T) * hs;
    pv.stride_c = static_cast<int64_t>(T) * hs;
    gemm_batched_lowp(be, pv);
    HeadsToRows merge;
    merge.heads_in = out.data();
    merge.batch = B;
    merge.seq_len = T;
    merge.heads = nh;
    merge.head_size = hs;
    merge.rows = rows.data();
    merge.row_stride = C;
    heads_to_rows_lowp(be, merge);
    AddLowp twice;
    twice.a = rows.data();
    twice.b = rows.data();
    twice.y = rows.data();
    twice.count = rows.count();
    add_lowp(be, twice);
    std::vector<uint16_t> bits;
    append_bits(bits, p.download());
    append_bits(bits, ds.download());
    append_bits(bits, rows.download());
    return bits;
  };
  const auto cross_entropy = [&](CpuBackend& be) {
    Buffer<lowp16> l(be, logits.size()), dl(be, logits.size());
    Buffer<int32_t> lab(be, labels.size()), correct(be, 1);
    Buffer<float> loss(be, 1);
    l.upload(logits);
    lab.upload(labels);
    SoftmaxXentForward xent;
    xent.logits = l.data();
    xent.labels = lab.data();
    xent.rows = xent_rows;
    xent.cols = xent_cols;
    xent.real_cols = xent_real;
    xent.loss_mean = loss.data();
    xent.correct_count = correct.data();
    softmax_xent_forward(be, xent);
    SoftmaxXentBackward dxent;
    dxent.logits = l.data();
    dxent.labels = lab.data();
    dxent.rows = xent_rows;
    dxent.cols = xent_cols;
    dxent.real_cols = xent_real;
    dxent.loss_scale = 4096.0f;
    dxent.dlogits = dl.data();
    softmax_xent_backward(be, dxent);
    std::vector<uint16_t> bits;
    append_bits(bits, loss.download());
    append_bits(bits, correct.download());
    append_bits(bits, dl.download());
    return bits;
  };
  const std::pair<const char*, RunOp> runs[] = {
      {"embedding", embedding}, {"layernorm", layernorm}, {"attention", attention}, {"cross-entropy", cross_entropy}};
  for (const auto& [name, run] : runs) {
    SCOPED_TRACE(name);
    const auto want = run(one);
    EXPECT_EQ(first_difference(run(one), want), -1) << "second run differs";
    EXPECT_EQ(first_difference(run(two), want), -1) << "two threads differ from one";
    set_f16c_enabled(false);
    EXPECT_EQ(first_difference(run(two), want), -1) << "portable loops differ from F16C";
    set_f16c_enabled(true);
  }
}

}  // namespace
}  // namespace ddp
