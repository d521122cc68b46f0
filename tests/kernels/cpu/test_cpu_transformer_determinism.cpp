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
    be.embedding_forward_lowp(tok.data(), d_wte.data(), d_wpe.data(), B, T, C, V, out.data());
    std::vector<uint16_t> bits;
    append_bits(bits, out.download());
    for (bool accumulate : {false, true}) {
      be.embedding_backward_lowp(tok.data(), d_dy.data(), B, T, C, V, d_wte.data(), d_wpe.data(), accumulate);
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
    be.layernorm_forward_lowp(d_x.data(), g.data(), b.data(), B * T, C, kLayerNormEps, y.data(), mean.data(),
                              rstd.data());
    std::vector<uint16_t> bits;
    append_bits(bits, y.download());
    append_bits(bits, mean.download());
    append_bits(bits, rstd.download());
    dx.upload(x);
    for (bool accumulate : {false, true}) {
      be.layernorm_backward_lowp(d_dy.data(), d_x.data(), g.data(), mean.data(), rstd.data(), B * T, C, dx.data(),
                                 accumulate, dg.data(), db.data(), accumulate);
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
    be.causal_softmax_forward_lowp(s.data(), bh, T, 0.2f, p.data());
    be.causal_softmax_backward_lowp(p.data(), dp.data(), bh, T, 0.2f, ds.data());
    be.rows_to_heads_lowp(rows.data(), C, B, T, nh, hs, heads.data());
    GemmLowp g;  // (P V) per head: [T, T] x [T, hs]
    g.m = T;
    g.n = hs;
    g.k = T;
    g.a = p.data();
    g.lda = T;
    g.b = heads.data();
    g.ldb = hs;
    g.c = out.data();
    g.ldc = hs;
    be.gemm_batched_lowp(g, bh, static_cast<int64_t>(T) * T, static_cast<int64_t>(T) * hs,
                         static_cast<int64_t>(T) * hs);
    be.heads_to_rows_lowp(out.data(), B, T, nh, hs, rows.data(), C);
    be.add_lowp(rows.data(), rows.data(), rows.data(), rows.count());
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
    be.softmax_xent_forward(l.data(), lab.data(), xent_rows, xent_cols, xent_real, loss.data(), correct.data());
    be.softmax_xent_backward(l.data(), lab.data(), xent_rows, xent_cols, xent_real, 4096.0f, dl.data());
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
