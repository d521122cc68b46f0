// test_cpu_kernels.cpp: every CpuBackend kernel against a plain
// double-precision reference written here, on fresh random inputs.
//
// Tolerances (stated once): an FP16 output is the RNE rounding of an FP32
// computation, so it lies within 2^-11 relative of the FP32 value; the FP32
// value differs from the exact one by the FP32 summation error, bounded by
// ~k * 2^-24 * sum|terms|. We allow kFp16RelTol (2 FP16 ulps) relative plus
// 1e-5 * sum|terms| + 6e-8 (one FP16 subnormal step) absolute. FP32 outputs:
// kFp32RelTol relative plus the same summation floor.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <stdexcept>

#include "kernels/buffer.h"
#include "kernels/cpu_backend.h"
#include "kernels/cpu_thread_pool.h"
#include "kernels/half_convert.h"
#include "test_support.h"

namespace ddp {
namespace {
using test::close_enough;

class CpuKernels : public ::testing::Test {
 protected:
  CpuKernels() : rng(test::test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test::test_seed())); }
  CpuBackend cpu{1};
  std::mt19937_64 rng;
};

// Reference row-major GEMM in double on the FP16 inputs; also returns sum|a*b|.
void gemm_reference(bool ta, bool tb, int m, int n, int k, double alpha, const std::vector<half16>& a,
                    const std::vector<half16>& b, double beta, const std::vector<half16>& c_in,
                    const std::vector<half16>* bias, std::vector<double>& c, std::vector<double>& mag) {
  c.assign(static_cast<size_t>(m) * n, 0.0);
  mag.assign(c.size(), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0, s_abs = 0;
      for (int p = 0; p < k; ++p) {
        const double av = to_float(ta ? a[static_cast<size_t>(p) * m + i] : a[static_cast<size_t>(i) * k + p]);
        const double bv = to_float(tb ? b[static_cast<size_t>(j) * k + p] : b[static_cast<size_t>(p) * n + j]);
        s += av * bv;
        s_abs += std::fabs(av * bv);
      }
      // beta == 0 means C is not read (BLAS semantics): it may hold poison.
      double v = alpha * s + (beta != 0 ? beta * to_float(c_in[static_cast<size_t>(i) * n + j]) : 0.0);
      if (bias) v += to_float((*bias)[j]);
      c[static_cast<size_t>(i) * n + j] = v;
      mag[static_cast<size_t>(i) * n + j] = std::fabs(alpha) * s_abs + std::fabs(v);
    }
}

void check_gemm(CpuBackend& cpu, std::mt19937_64& rng, bool ta, bool tb, int m, int n, int k, float alpha,
                float beta, bool with_bias) {
  SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n << " k=" << k
                                  << " alpha=" << alpha << " beta=" << beta << " bias=" << with_bias);
  const auto a = test::random_halves(rng, static_cast<size_t>(m) * k);
  const auto b = test::random_halves(rng, static_cast<size_t>(k) * n);
  const auto c0 = beta != 0 ? test::random_halves(rng, static_cast<size_t>(m) * n) : test::poison_halves(static_cast<size_t>(m) * n);
  const auto bias = test::random_halves(rng, n);
  Buffer<half16> da(cpu, a.size()), db(cpu, b.size()), dc(cpu, c0.size()), dbias(cpu, n);
  da.upload(a), db.upload(b), dc.upload(c0), dbias.upload(bias);
  GemmFp16 g;
  g.trans_a = ta ? Transpose::Yes : Transpose::No;
  g.trans_b = tb ? Transpose::Yes : Transpose::No;
  g.m = m, g.n = n, g.k = k, g.alpha = alpha, g.beta = beta;
  g.a = da.data(), g.lda = ta ? m : k;
  g.b = db.data(), g.ldb = tb ? k : n;
  g.c = dc.data(), g.ldc = n;
  g.bias = with_bias ? dbias.data() : nullptr;
  cpu.gemm_fp16(g);
  std::vector<double> want, mag;
  gemm_reference(ta, tb, m, n, k, alpha, a, b, beta, c0, with_bias ? &bias : nullptr, want, mag);
  const auto got = test::to_doubles(dc.download());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(close_enough(got[i], want[i], test::kFp16RelTol, 1e-5 * mag[i] + 6e-8))
        << "element " << i << ": got " << got[i] << " want " << want[i];
}

TEST_F(CpuKernels, GemmAllTransposesOddShapes) {
  const int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 1000}, {1, 1003, 3}, {1001, 17, 3}, {64, 33, 129}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) check_gemm(cpu, rng, ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, false);
}

TEST_F(CpuKernels, GemmAlphaBetaAndBias) {
  check_gemm(cpu, rng, false, true, 37, 29, 65, 0.5f, 1.0f, false);
  check_gemm(cpu, rng, true, false, 29, 37, 7, -2.0f, 0.25f, false);
  check_gemm(cpu, rng, false, true, 45, 130, 200, 1.0f, 0.0f, true);
  check_gemm(cpu, rng, true, true, 5, 3, 1000, 1.0f, 0.0f, true);
}

TEST_F(CpuKernels, GemmStridedOperands) {
  // lda/ldb/ldc larger than the logical width: views into wider matrices.
  const int m = 7, n = 5, k = 9, lda = 12, ldb = 8, ldc = 6;
  auto a = test::random_halves(rng, static_cast<size_t>(m) * lda);
  auto b = test::random_halves(rng, static_cast<size_t>(k) * ldb);
  Buffer<half16> da(cpu, a.size()), db(cpu, b.size()), dc(cpu, static_cast<size_t>(m) * ldc);
  da.upload(a), db.upload(b), dc.upload(test::poison_halves(dc.count()));
  GemmFp16 g;
  g.m = m, g.n = n, g.k = k, g.a = da.data(), g.lda = lda, g.b = db.data(), g.ldb = ldb, g.c = dc.data(), g.ldc = ldc;
  cpu.gemm_fp16(g);
  const auto c = dc.download();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double t = to_float(a[i * lda + p]) * static_cast<double>(to_float(b[p * ldb + j]));
        s += t, mag += std::fabs(t);
      }
      ASSERT_TRUE(close_enough(to_float(c[i * ldc + j]), s, test::kFp16RelTol, 1e-5 * mag + 6e-8));
    }
  for (int i = 0; i < m; ++i)  // padding columns untouched
    for (int j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j].bits, test::kPoisonHalfBits);
}

TEST_F(CpuKernels, BiasAdd) {
  const int rows = 33, cols = 71;
  const auto y = test::random_halves(rng, rows * cols), bias = test::random_halves(rng, cols);
  Buffer<half16> dy(cpu, y.size()), db(cpu, cols);
  dy.upload(y), db.upload(bias);
  cpu.add_bias_fp16(dy.data(), db.data(), rows, cols);
  const auto got = dy.download();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double want = static_cast<double>(to_float(y[r * cols + c])) + to_float(bias[c]);
      ASSERT_TRUE(close_enough(to_float(got[r * cols + c]), want, test::kFp16RelTol, 6e-8));
    }
}

double gelu_ref(double z) { return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); }
double gelu_grad_ref(double z) {
  return 0.5 * (1 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
}

TEST_F(CpuKernels, ActivationsForwardBackward) {
  const size_t n = 10007;
  const auto z = test::random_halves(rng, n, -6.0f, 6.0f), dy = test::random_halves(rng, n);
  Buffer<half16> dz_in(cpu, n), ddy(cpu, n), out(cpu, n);
  dz_in.upload(z), ddy.upload(dy);
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    out.upload(test::poison_halves(n));
    cpu.activation_forward_fp16(act, dz_in.data(), out.data(), n);
    auto y = out.download();
    for (size_t i = 0; i < n; ++i) {
      const double zi = to_float(z[i]);
      const double want = act == Activation::Relu ? std::max(zi, 0.0) : gelu_ref(zi);
      ASSERT_TRUE(close_enough(to_float(y[i]), want, test::kFp16RelTol, 1e-6)) << "z=" << zi;
    }
    out.upload(test::poison_halves(n));
    cpu.activation_backward_fp16(act, dz_in.data(), ddy.data(), out.data(), n);
    auto dz = out.download();
    for (size_t i = 0; i < n; ++i) {
      const double zi = to_float(z[i]), g = to_float(dy[i]);
      const double want = act == Activation::Relu ? (zi > 0 ? g : 0.0) : g * gelu_grad_ref(zi);
      ASSERT_TRUE(close_enough(to_float(dz[i]), want, test::kFp16RelTol, 1e-6)) << "z=" << zi;
    }
  }
}

TEST_F(CpuKernels, BiasGradColumnSums) {
  const int rows = 1031, cols = 19;
  const auto dy = test::random_halves(rng, static_cast<size_t>(rows) * cols);
  const auto prev = test::random_halves(rng, cols);
  Buffer<half16> ddy(cpu, dy.size()), db(cpu, cols);
  ddy.upload(dy);
  for (bool accumulate : {false, true}) {
    db.upload(accumulate ? prev : test::poison_halves(cols));
    cpu.bias_grad_fp16(ddy.data(), rows, cols, db.data(), accumulate);
    const auto got = db.download();
    for (int c = 0; c < cols; ++c) {
      double s = accumulate ? to_float(prev[c]) : 0.0, mag = 0;
      for (int r = 0; r < rows; ++r) s += to_float(dy[r * cols + c]), mag += std::fabs(to_float(dy[r * cols + c]));
      ASSERT_TRUE(close_enough(to_float(got[c]), s, test::kFp16RelTol, 1e-5 * mag + 6e-8)) << c;
    }
  }
}

TEST_F(CpuKernels, Casts) {
  const size_t n = 4099;
  auto f = test::random_floats(rng, n, -70000.0f, 70000.0f);
  Buffer<float> df(cpu, n), back(cpu, n);
  Buffer<half16> dh(cpu, n);
  df.upload(f);
  dh.upload(test::poison_halves(n));
  cpu.cast_fp32_to_fp16(df.data(), dh.data(), n);
  cpu.cast_fp16_to_fp32(dh.data(), back.data(), n);
  const auto h = dh.download();
  const auto b = back.download();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(h[i].bits, float_to_half_bits_portable(f[i]));
    ASSERT_EQ(b[i], half_bits_to_float_portable(h[i].bits));
  }
}

TEST_F(CpuKernels, SoftmaxCrossEntropy) {
  const int rows = 67, cols = 10;
  const float scale = 1024.0f;
  const auto logits = test::random_halves(rng, rows * cols, -8.0f, 8.0f);
  const auto labels = test::random_labels(rng, rows, cols);
  Buffer<half16> dl(cpu, logits.size()), grad(cpu, logits.size());
  Buffer<int32_t> dlab(cpu, rows), correct(cpu, 1);
  Buffer<float> loss(cpu, 1);
  dl.upload(logits), dlab.upload(labels), grad.upload(test::poison_halves(grad.count()));
  cpu.softmax_xent_forward(dl.data(), dlab.data(), rows, cols, loss.data(), correct.data());
  cpu.softmax_xent_backward(dl.data(), dlab.data(), rows, cols, scale, grad.data());
  double want_loss = 0;
  int want_correct = 0;
  const auto g = grad.download();
  for (int r = 0; r < rows; ++r) {
    double mx = -1e30, se = 0;
    int arg = 0;
    for (int c = 0; c < cols; ++c)
      if (to_float(logits[r * cols + c]) > mx) mx = to_float(logits[r * cols + c]), arg = c;
    for (int c = 0; c < cols; ++c) se += std::exp(to_float(logits[r * cols + c]) - mx);
    want_loss += mx + std::log(se) - to_float(logits[r * cols + labels[r]]);
    want_correct += arg == labels[r];
    for (int c = 0; c < cols; ++c) {
      const double p = std::exp(to_float(logits[r * cols + c]) - mx) / se;
      const double want = scale * (p - (c == labels[r])) / rows;
      ASSERT_TRUE(close_enough(to_float(g[r * cols + c]), want, test::kFp16RelTol, 1e-4)) << r << "," << c;
    }
  }
  EXPECT_TRUE(close_enough(loss.download()[0], want_loss / rows, 1e-5, 1e-6));
  EXPECT_EQ(correct.download()[0], want_correct);
}

TEST_F(CpuKernels, MeanSquaredError) {
  const int rows = 41, cols = 7;
  const float scale = 512.0f;
  const auto pred = test::random_halves(rng, rows * cols);
  const auto target = test::random_floats(rng, rows * cols);
  Buffer<half16> dp(cpu, pred.size()), grad(cpu, pred.size());
  Buffer<float> dt(cpu, target.size()), loss(cpu, 1);
  dp.upload(pred), dt.upload(target), grad.upload(test::poison_halves(grad.count()));
  cpu.mse_forward(dp.data(), dt.data(), rows, cols, loss.data());
  cpu.mse_backward(dp.data(), dt.data(), rows, cols, scale, grad.data());
  double want = 0;
  const auto g = grad.download();
  const double n = rows * cols;
  for (int i = 0; i < rows * cols; ++i) {
    const double d = static_cast<double>(to_float(pred[i])) - target[i];
    want += d * d;
    ASSERT_TRUE(close_enough(to_float(g[i]), scale * 2 * d / n, test::kFp16RelTol, 6e-8));
  }
  EXPECT_TRUE(close_enough(loss.download()[0], want / n, 1e-5, 1e-7));
}

TEST_F(CpuKernels, UnscaleFindsOneNonFiniteAnywhere) {
  const size_t n = 1 << 20;
  const float inv_scale = 1.0f / 4096.0f;
  auto g = test::random_halves(rng, n, -100.0f, 100.0f);
  Buffer<half16> dg(cpu, n);
  Buffer<float> out(cpu, n);
  Buffer<int32_t> flag(cpu, 1);
  dg.upload(g);
  flag.zero();
  cpu.unscale_fp16_to_fp32(dg.data(), out.data(), n, inv_scale, flag.data());
  EXPECT_EQ(flag.download()[0], 0);
  const auto o = out.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], to_float(g[i]) * inv_scale);
  for (uint16_t bad : {uint16_t(0x7c00), uint16_t(0xfc00), uint16_t(0x7e00)}) {  // +Inf, -Inf, NaN
    const size_t pos = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    auto poisoned = g;
    poisoned[pos].bits = bad;
    dg.upload(poisoned);
    flag.zero();
    cpu.unscale_fp16_to_fp32(dg.data(), out.data(), n, inv_scale, flag.data());
    EXPECT_EQ(flag.download()[0], 1) << "bits " << bad << " at " << pos;
  }
}

TEST_F(CpuKernels, L2Norm) {
  const size_t n = 300007;
  const auto x = test::random_floats(rng, n, -3.0f, 3.0f);
  Buffer<float> dx(cpu, n), norm(cpu, 1);
  dx.upload(x);
  cpu.l2_norm_fp32(dx.data(), n, norm.data());
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  EXPECT_TRUE(close_enough(norm.download()[0], std::sqrt(s), test::kFp32RelTol, 0));
}

// PyTorch torch.optim.SGD, written out in double.
void sgd_reference(const SgdParams& s, double grad, double& p, double& buf) {
  double g = grad * s.grad_multiplier + s.weight_decay * p;
  if (s.momentum != 0) {
    buf = s.first_step ? g : s.momentum * buf + (1 - s.dampening) * g;
    g = s.nesterov ? g + s.momentum * buf : buf;
  }
  p -= s.lr * g;
}

TEST_F(CpuKernels, SgdMatchesTorchSemantics) {
  const size_t n = 5003;
  for (int variant = 0; variant < 4; ++variant) {
    SgdParams s;
    s.lr = 0.05f, s.momentum = variant == 0 ? 0.0f : 0.9f, s.nesterov = variant == 2;
    s.weight_decay = variant == 3 ? 1e-3f : 0.0f, s.grad_multiplier = variant == 3 ? 0.5f : 1.0f;
    const auto grads = test::random_floats(rng, n), p0 = test::random_floats(rng, n), m0 = test::random_floats(rng, n);
    Buffer<float> dg(cpu, n), dp(cpu, n), dm(cpu, n);
    Buffer<half16> dw(cpu, n);
    Buffer<int32_t> flag(cpu, 1);
    dg.upload(grads), dp.upload(p0), dm.upload(m0), flag.zero(), dw.upload(test::poison_halves(n));
    for (bool first : {true, false}) {
      s.first_step = first;
      std::vector<double> p(p0.begin(), p0.end()), m(m0.begin(), m0.end());
      dp.upload(p0), dm.upload(m0);
      cpu.sgd_update(s, dg.data(), dp.data(), dm.data(), dw.data(), n, flag.data());
      const auto gp = dp.download(), gm = dm.download();
      const auto gw = dw.download();
      for (size_t i = 0; i < n; ++i) {
        sgd_reference(s, grads[i], p[i], m[i]);
        ASSERT_TRUE(close_enough(gp[i], p[i], test::kFp32RelTol, 1e-6)) << "variant " << variant << " i " << i;
        if (s.momentum != 0) {
          ASSERT_TRUE(close_enough(gm[i], m[i], test::kFp32RelTol, 1e-6));
        }
        ASSERT_EQ(gw[i].bits, float_to_half_bits_portable(gp[i]));  // re-cast from the master
      }
    }
  }
}

TEST_F(CpuKernels, SgdSkippedWhenFlagSetChangesNothing) {
  const size_t n = 777;
  const auto grads = test::random_floats(rng, n), p0 = test::random_floats(rng, n), m0 = test::random_floats(rng, n);
  const auto w0 = test::random_halves(rng, n);
  Buffer<float> dg(cpu, n), dp(cpu, n), dm(cpu, n);
  Buffer<half16> dw(cpu, n);
  Buffer<int32_t> flag(cpu, 1);
  dg.upload(grads), dp.upload(p0), dm.upload(m0), dw.upload(w0);
  flag.upload(std::vector<int32_t>{1});
  SgdParams s;
  s.lr = 0.1f, s.momentum = 0.9f, s.first_step = false, s.weight_decay = 0.01f;
  cpu.sgd_update(s, dg.data(), dp.data(), dm.data(), dw.data(), n, flag.data());
  EXPECT_EQ(dp.download(), p0);
  EXPECT_EQ(dm.download(), m0);
  const auto w = dw.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i].bits, w0[i].bits);
}

// ---- the same kernels split over threads ------------------------------------------
// CpuBackend splits large GEMMs and element-wise passes over its threads. The
// element-wise results must be bitwise those of one thread and of the
// portable (non-F16C) loops: the split is by index and every element is
// computed by the same operations. GEMM slices are separate BLAS calls, so
// their sums may differ from one thread's in the last bit: those are held to
// the double reference (tolerances above) and to run-to-run equality.

TEST(CpuThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    CpuThreadPool pool(threads);
    for (size_t count : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{100003}})
      for (size_t pieces : {size_t{1}, size_t{2}, size_t{7}, size_t{64}}) {
        std::vector<std::atomic<int>> hits(count);
        pool.parallel_for(count, 64, pieces, [&](size_t b, size_t e) {
          EXPECT_EQ(b % 64, 0u);
          for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " pieces " << pieces << " i " << i;
      }
  }
}

TEST(CpuThreadPool, RethrowsAndRunsNestedCallsInline) {
  CpuThreadPool pool(2);
  for (size_t bad : {size_t{0}, size_t{500}, size_t{990}})  // whichever thread takes the piece
    EXPECT_THROW(pool.parallel_for(1000, 10, 100,
                                   [&](size_t b, size_t) {
                                     if (b == bad) throw std::runtime_error("piece");
                                   }),
                 std::runtime_error);
  std::atomic<int> hits{0};
  pool.parallel_for(8, 1, 8, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) pool.parallel_for(10, 1, 10, [&](size_t b2, size_t e2) { hits += int(e2 - b2); });
  });
  EXPECT_EQ(hits.load(), 80);
  pool.parallel_for(100, 1, 4, [&](size_t b, size_t e) { hits += int(e - b); });  // still usable
  EXPECT_EQ(hits.load(), 180);
}

class CpuKernelsThreaded : public ::testing::Test {
 protected:
  CpuKernelsThreaded() : rng(test::test_seed()) {}
  void SetUp() override { SCOPED_TRACE("seed " + std::to_string(test::test_seed())); }
  void TearDown() override { set_f16c_enabled(true); }
  CpuBackend one{1}, two{2};
  std::mt19937_64 rng;
  // Above the backend's threshold for splitting an element-wise pass.
  static constexpr size_t kLarge = 100003;
};

TEST_F(CpuKernelsThreaded, GemmSlicesMatchReferenceAndRepeatBitwise) {
  // Above the split threshold; both split directions, all transposes,
  // slices that do not divide evenly, bias and beta.
  const int shapes[][3] = {{256, 192, 96}, {96, 256, 130}, {300, 40, 200}, {37, 531, 150}, {1000, 17, 90}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) check_gemm(two, rng, ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, ta == tb);
  check_gemm(two, rng, true, false, 200, 300, 64, -0.5f, 0.75f, false);
  check_gemm(two, rng, false, true, 64, 300, 200, 2.0f, 0.0f, true);

  const int m = 160, n = 150, k = 120;
  const auto a = test::random_halves(rng, static_cast<size_t>(m) * k), b = test::random_halves(rng, static_cast<size_t>(n) * k);
  const auto bias = test::random_halves(rng, n);
  Buffer<half16> da(two, a.size()), db(two, b.size()), dbias(two, n), dc(two, static_cast<size_t>(m) * n);
  da.upload(a), db.upload(b), dbias.upload(bias);
  GemmFp16 g;
  g.trans_b = Transpose::Yes;
  g.m = m, g.n = n, g.k = k, g.a = da.data(), g.lda = k, g.b = db.data(), g.ldb = k, g.c = dc.data(), g.ldc = n;
  g.bias = dbias.data();
  two.gemm_fp16(g);
  const auto first = dc.download();
  dc.upload(test::poison_halves(dc.count()));
  two.gemm_fp16(g);
  const auto second = dc.download();
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i].bits, second[i].bits) << i;
}

TEST_F(CpuKernelsThreaded, GemmSlicesWithStrides) {
  // Views into wider matrices on the split path: padding stays untouched.
  const int m = 130, n = 70, k = 200, lda = 210, ldb = 75, ldc = 81;
  const auto a = test::random_halves(rng, static_cast<size_t>(m) * lda), b = test::random_halves(rng, static_cast<size_t>(k) * ldb);
  Buffer<half16> da(two, a.size()), db(two, b.size()), dc(two, static_cast<size_t>(m) * ldc);
  da.upload(a), db.upload(b), dc.upload(test::poison_halves(dc.count()));
  GemmFp16 g;
  g.m = m, g.n = n, g.k = k, g.a = da.data(), g.lda = lda, g.b = db.data(), g.ldb = ldb, g.c = dc.data(), g.ldc = ldc;
  two.gemm_fp16(g);
  const auto c = dc.download();
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double t = to_float(a[i * lda + p]) * static_cast<double>(to_float(b[p * ldb + j]));
        s += t, mag += std::fabs(t);
      }
      ASSERT_TRUE(close_enough(to_float(c[i * ldc + j]), s, test::kFp16RelTol, 1e-5 * mag + 6e-8));
    }
    for (int j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j].bits, test::kPoisonHalfBits);
  }
}

// Runs `kernel` on `backend` with the F16C loops on or off; returns its output.
template <class Kernel>
std::vector<half16> run_halves(CpuBackend& backend, bool f16c, size_t count, Kernel kernel) {
  set_f16c_enabled(f16c);
  Buffer<half16> out(backend, count);
  out.upload(test::poison_halves(count));
  kernel(backend, out.data());
  set_f16c_enabled(true);
  return out.download();
}

void expect_same_bits(const std::vector<half16>& got, const std::vector<half16>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].bits, want[i].bits) << what << " element " << i;
}

TEST_F(CpuKernelsThreaded, ElementwiseBitwiseEqualAcrossThreadsAndPaths) {
  const size_t n = kLarge;
  auto z = test::random_halves(rng, n, -6.0f, 6.0f);
  const auto dy = test::random_halves(rng, n);
  // Special values on both sides of the split and in the tails.
  const uint16_t specials[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x8001, 0x7bff};
  for (size_t i = 0; i < 8; ++i) z[i].bits = z[n / 2 + i].bits = z[n - 1 - i].bits = specials[i];
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    auto fwd = [&](CpuBackend& be, half16* out) {
      Buffer<half16> dz(be, n);
      dz.upload(z);
      be.activation_forward_fp16(act, dz.data(), out, n);
    };
    auto bwd = [&](CpuBackend& be, half16* out) {
      Buffer<half16> dz(be, n);
      dz.upload(z);
      Buffer<half16> ddy(be, n);
      ddy.upload(dy);
      be.activation_backward_fp16(act, dz.data(), ddy.data(), out, n);
    };
    const auto want_f = run_halves(one, false, n, fwd), want_b = run_halves(one, false, n, bwd);
    for (bool f16c : {false, true}) {
      expect_same_bits(run_halves(two, f16c, n, fwd), want_f, "activation forward");
      expect_same_bits(run_halves(two, f16c, n, bwd), want_b, "activation backward");
      expect_same_bits(run_halves(one, f16c, n, fwd), want_f, "activation forward, one thread");
    }
  }

  const int rows = 300, cols = 333;  // 3 strips of 32, one of 8, a scalar tail, split across threads
  const auto g = test::random_halves(rng, static_cast<size_t>(rows) * cols), prev = test::random_halves(rng, cols);
  for (bool accumulate : {false, true}) {
    auto bias_grad = [&](CpuBackend& be, half16* out) {
      Buffer<half16> dg(be, g.size());
      dg.upload(g);
      if (accumulate) be.copy_to_device(out, prev.data(), cols * sizeof(half16));
      be.bias_grad_fp16(dg.data(), rows, cols, out, accumulate);
    };
    const auto want = run_halves(one, false, cols, bias_grad);
    for (bool f16c : {false, true}) expect_same_bits(run_halves(two, f16c, cols, bias_grad), want, "bias grad");
  }
  auto bias_add = [&](CpuBackend& be, half16* out) {
    be.copy_to_device(out, g.data(), g.size() * sizeof(half16));
    Buffer<half16> db(be, cols);
    db.upload(prev);
    be.add_bias_fp16(out, db.data(), rows, cols);
  };
  const auto want_bias = run_halves(one, false, g.size(), bias_add);
  for (bool f16c : {false, true}) expect_same_bits(run_halves(two, f16c, g.size(), bias_add), want_bias, "bias add");

  const auto f = test::random_floats(rng, n, -70000.0f, 70000.0f);
  auto cast = [&](CpuBackend& be, half16* out) {
    Buffer<float> df(be, n);
    df.upload(f);
    be.cast_fp32_to_fp16(df.data(), out, n);
  };
  const auto want_cast = run_halves(one, false, n, cast);
  expect_same_bits(run_halves(two, true, n, cast), want_cast, "cast");
  Buffer<half16> dz(two, n);
  Buffer<float> back(two, n);
  dz.upload(z);
  two.cast_fp16_to_fp32(dz.data(), back.data(), n);
  const auto b = back.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_to_bits(b[i]), float_to_bits(half_bits_to_float_portable(z[i].bits)));
}

TEST_F(CpuKernelsThreaded, UnscaleSplitFindsNonFiniteAndChecksWithoutOutput) {
  const size_t n = kLarge;
  const float inv_scale = 1.0f / 4096.0f;
  auto g = test::random_halves(rng, n, -100.0f, 100.0f);
  Buffer<half16> dg(two, n);
  Buffer<float> out(two, n);
  Buffer<int32_t> flag(two, 1);
  dg.upload(g);
  for (float* dst : {out.data(), static_cast<float*>(nullptr)}) {
    flag.zero();
    two.unscale_fp16_to_fp32(dg.data(), dst, n, inv_scale, flag.data());
    EXPECT_EQ(flag.download()[0], 0);
  }
  const auto o = out.download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], to_float(g[i]) * inv_scale);
  // Each thread's range, its vector body and its tail; Inf, NaN, and a finite
  // FP16 that overflows once multiplied.
  for (size_t pos : {size_t{0}, n / 2 - 1, n / 2 + 70, n - 1}) {
    for (uint16_t bad : {uint16_t(0x7c00), uint16_t(0x7e00), uint16_t(0x7bff)}) {
      auto poisoned = g;
      poisoned[pos].bits = bad;
      dg.upload(poisoned);
      const float scale = bad == 0x7bff ? 1e35f : inv_scale;
      for (float* dst : {out.data(), static_cast<float*>(nullptr)}) {
        flag.zero();
        two.unscale_fp16_to_fp32(dg.data(), dst, n, scale, flag.data());
        EXPECT_EQ(flag.download()[0], 1) << "bits " << bad << " at " << pos << (dst ? "" : " (check only)");
      }
    }
  }
}

// sgd_update must stay bitwise equal to sgd_update_element applied element by
// element, whatever the thread count, F16C or not, and the fused FP16-gradient
// step bitwise equal to unscale followed by sgd_update.
TEST_F(CpuKernelsThreaded, SgdBitwiseEqualsScalarElementLoop) {
  const size_t n = kLarge;
  const float inv_scale = 1.0f / 1024.0f;
  const auto grads16 = test::random_halves(rng, n, -50.0f, 50.0f);
  const auto p0 = test::random_floats(rng, n), m0 = test::random_floats(rng, n);
  std::vector<float> grads(n);
  for (size_t i = 0; i < n; ++i) grads[i] = unscale_element(grads16[i], inv_scale);
  for (int variant = 0; variant < 6; ++variant) {
    SgdParams s;
    s.lr = 0.05f, s.momentum = variant == 0 ? 0.0f : 0.9f, s.nesterov = variant == 2;
    s.weight_decay = variant >= 3 ? 1e-3f : 0.0f, s.grad_multiplier = variant >= 3 ? 0.37f : 1.0f;
    s.dampening = variant == 4 ? 0.1f : 0.0f;
    const bool no_buffer = variant == 5;  // momentum_fp32 null: a zero buffer each step
    for (bool first : {true, false}) {
      s.first_step = first;
      std::vector<float> p = p0, m = m0;
      for (size_t i = 0; i < n; ++i) {
        float dummy = 0.0f;
        sgd_update_element(s, grads[i], p[i], no_buffer ? dummy : m[i]);
      }
      for (CpuBackend* be : {&one, &two})
        for (bool f16c : {false, true})
          for (bool fused : {false, true}) {
            SCOPED_TRACE(testing::Message() << "variant " << variant << " first " << first << " threads "
                                            << be->threads() << " f16c " << f16c << " fused " << fused);
            set_f16c_enabled(f16c);
            Buffer<float> dg(*be, n), dp(*be, n), dm(*be, n);
            Buffer<half16> dg16(*be, n), dw(*be, n);
            dg.upload(grads), dg16.upload(grads16), dp.upload(p0), dm.upload(m0), dw.upload(test::poison_halves(n));
            float* mom = no_buffer ? nullptr : dm.data();
            if (fused)
              be->sgd_update_fp16_grads(s, dg16.data(), inv_scale, dp.data(), mom, dw.data(), n, nullptr);
            else
              be->sgd_update(s, dg.data(), dp.data(), mom, dw.data(), n, nullptr);
            set_f16c_enabled(true);
            const auto gp = dp.download(), gm = dm.download();
            const auto gw = dw.download();
            for (size_t i = 0; i < n; ++i) {
              ASSERT_EQ(float_to_bits(gp[i]), float_to_bits(p[i])) << i;
              ASSERT_EQ(float_to_bits(gm[i]), float_to_bits(m[i])) << i;
              ASSERT_EQ(gw[i].bits, float_to_half_bits_portable(p[i])) << i;
            }
          }
    }
  }
}

}  // namespace
}  // namespace ddp
