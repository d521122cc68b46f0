// test_cpu_gemm.cpp: CpuBackend's FP16 GEMM (FP32 SGEMM underneath) against a
// double reference: every transpose, odd shapes, alpha, beta, bias, strided
// operands, and the GEMM split over two threads (slices that do not divide
// evenly, repeat runs bitwise equal). Tolerances: cpu_kernel_support.h.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/buffer.h"
#include "kernels/ops/gemm.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h: CpuKernels, inputs, tolerances

// Reference row-major GEMM in double on the FP16 inputs; also returns sum|a*b|.
void gemm_reference(const LowpFormat& fmt, bool ta, bool tb, int m, int n, int k, double alpha,
                    const std::vector<lowp16>& a, const std::vector<lowp16>& b, double beta,
                    const std::vector<lowp16>& c_in, const std::vector<lowp16>* bias, std::vector<double>& c,
                    std::vector<double>& mag) {
  c.assign(static_cast<size_t>(m) * n, 0.0);
  mag.assign(c.size(), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0, s_abs = 0;
      for (int p = 0; p < k; ++p) {
        const double av = fmt.widen(ta ? a[static_cast<size_t>(p) * m + i] : a[static_cast<size_t>(i) * k + p]);
        const double bv = fmt.widen(tb ? b[static_cast<size_t>(j) * k + p] : b[static_cast<size_t>(p) * n + j]);
        s += av * bv;
        s_abs += std::fabs(av * bv);
      }
      // beta == 0 means C is not read (BLAS semantics): it may hold poison.
      double v = alpha * s + (beta != 0 ? beta * fmt.widen(c_in[static_cast<size_t>(i) * n + j]) : 0.0);
      if (bias) v += fmt.widen((*bias)[j]);
      c[static_cast<size_t>(i) * n + j] = v;
      mag[static_cast<size_t>(i) * n + j] = std::fabs(alpha) * s_abs + std::fabs(v);
    }
}

void check_gemm(const LowpFormat& fmt, CpuBackend& cpu, std::mt19937_64& rng, bool ta, bool tb, int m, int n, int k,
                float alpha, float beta, bool with_bias) {
  SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n << " k=" << k
                                  << " alpha=" << alpha << " beta=" << beta << " bias=" << with_bias);
  const auto a = fmt.random(rng, static_cast<size_t>(m) * k);
  const auto b = fmt.random(rng, static_cast<size_t>(k) * n);
  const auto c0 = beta != 0 ? fmt.random(rng, static_cast<size_t>(m) * n) : fmt.poison(static_cast<size_t>(m) * n);
  const auto bias = fmt.random(rng, n);
  Buffer<lowp16> da(cpu, a.size()), db(cpu, b.size()), dc(cpu, c0.size()), dbias(cpu, n);
  da.upload(a);
  db.upload(b);
  dc.upload(c0);
  dbias.upload(bias);
  GemmLowp g;
  g.trans_a = ta ? Transpose::Yes : Transpose::No;
  g.trans_b = tb ? Transpose::Yes : Transpose::No;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = da.data();
  g.lda = ta ? m : k;
  g.b = db.data();
  g.ldb = tb ? k : n;
  g.c = dc.data();
  g.ldc = n;
  g.bias = with_bias ? dbias.data() : nullptr;
  gemm_lowp(cpu, g);
  std::vector<double> want, mag;
  gemm_reference(fmt, ta, tb, m, n, k, alpha, a, b, beta, c0, with_bias ? &bias : nullptr, want, mag);
  const auto got = fmt.widened_doubles(dc.download());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(close_enough(got[i], want[i], fmt.rel_tol(), 1e-5 * mag[i] + 6e-8))
        << "element " << i << ": got " << got[i] << " want " << want[i];
}

TEST_P(CpuLowpKernels, GemmAllTransposesOddShapes) {
  const int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 1000}, {1, 1003, 3}, {1001, 17, 3}, {64, 33, 129}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) check_gemm(fmt, cpu, rng, ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, false);
}

TEST_P(CpuLowpKernels, GemmAlphaBetaAndBias) {
  check_gemm(fmt, cpu, rng, false, true, 37, 29, 65, 0.5f, 1.0f, false);
  check_gemm(fmt, cpu, rng, true, false, 29, 37, 7, -2.0f, 0.25f, false);
  check_gemm(fmt, cpu, rng, false, true, 45, 130, 200, 1.0f, 0.0f, true);
  check_gemm(fmt, cpu, rng, true, true, 5, 3, 1000, 1.0f, 0.0f, true);
}

TEST_P(CpuLowpKernels, GemmStridedOperands) {
  // lda/ldb/ldc larger than the logical width: views into wider matrices.
  const int m = 7, n = 5, k = 9, lda = 12, ldb = 8, ldc = 6;
  auto a = fmt.random(rng, static_cast<size_t>(m) * lda);
  auto b = fmt.random(rng, static_cast<size_t>(k) * ldb);
  Buffer<lowp16> da(cpu, a.size()), db(cpu, b.size()), dc(cpu, static_cast<size_t>(m) * ldc);
  da.upload(a);
  db.upload(b);
  dc.upload(fmt.poison(dc.count()));
  GemmLowp g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = da.data();
  g.lda = lda;
  g.b = db.data();
  g.ldb = ldb;
  g.c = dc.data();
  g.ldc = ldc;
  gemm_lowp(cpu, g);
  const auto c = dc.download();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double t = fmt.widen(a[i * lda + p]) * static_cast<double>(fmt.widen(b[p * ldb + j]));
        s += t;
        mag += std::fabs(t);
      }
      ASSERT_TRUE(close_enough(fmt.widen(c[i * ldc + j]), s, fmt.rel_tol(), 1e-5 * mag + 6e-8));
    }
  for (int i = 0; i < m; ++i)  // padding columns untouched
    for (int j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j].bits, test::kPoisonHalfBits);
}

// ---- split over threads ------------------------------------------------------------

TEST_P(CpuLowpKernelsThreaded, GemmSlicesMatchReferenceAndRepeatBitwise) {
  // Above the split threshold; both split directions, all transposes,
  // slices that do not divide evenly, bias and beta.
  const int shapes[][3] = {{256, 192, 96}, {96, 256, 130}, {300, 40, 200}, {37, 531, 150}, {1000, 17, 90}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) check_gemm(fmt, two, rng, ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, ta == tb);
  check_gemm(fmt, two, rng, true, false, 200, 300, 64, -0.5f, 0.75f, false);
  check_gemm(fmt, two, rng, false, true, 64, 300, 200, 2.0f, 0.0f, true);

  const int m = 160, n = 150, k = 120;
  const auto a = fmt.random(rng, static_cast<size_t>(m) * k), b = fmt.random(rng, static_cast<size_t>(n) * k);
  const auto bias = fmt.random(rng, n);
  Buffer<lowp16> da(two, a.size()), db(two, b.size()), dbias(two, n), dc(two, static_cast<size_t>(m) * n);
  da.upload(a);
  db.upload(b);
  dbias.upload(bias);
  GemmLowp g;
  g.trans_b = Transpose::Yes;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = da.data();
  g.lda = k;
  g.b = db.data();
  g.ldb = k;
  g.c = dc.data();
  g.ldc = n;
  g.bias = dbias.data();
  gemm_lowp(two, g);
  const auto first = dc.download();
  dc.upload(fmt.poison(dc.count()));
  gemm_lowp(two, g);
  const auto second = dc.download();
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i].bits, second[i].bits) << i;
}

// Row slices (m at least n) give one thread's bits: each slice's BLAS call
// starts at a multiple of the slice grain (48 rows, cpu_gemm.cpp), where
// OpenBLAS's Zen kernels are in step with the whole call (16-row slices
// are not). Column slices carry no such promise.
TEST_P(CpuLowpKernelsThreaded, GemmRowSlicesGiveOneThreadsBits) {
  // Each cut into slices of at least 2^20 multiply-adds on 2 threads (no
  // shape falls back to one slice).
  const int shapes[][3] = {{200, 64, 384}, {600, 64, 384}, {1000, 48, 100}, {150, 100, 400}, {517, 96, 48}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const int m = s[0], n = s[1], k = s[2];
        SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " ta " +
                     std::to_string(ta) + " tb " + std::to_string(tb));
        const auto a = fmt.random(rng, static_cast<size_t>(m) * k), b = fmt.random(rng, static_cast<size_t>(n) * k);
        std::vector<lowp16> got[2];
        CpuBackend* backends[2] = {&one, &two};
        for (int t = 0; t < 2; ++t) {
          Backend& be = *backends[t];
          Buffer<lowp16> da(be, a.size()), db(be, b.size()), dc(be, static_cast<size_t>(m) * n);
          da.upload(a);
          db.upload(b);
          dc.upload(fmt.poison(dc.count()));
          GemmLowp g;
          g.trans_a = ta ? Transpose::Yes : Transpose::No;
          g.trans_b = tb ? Transpose::Yes : Transpose::No;
          g.m = m;
          g.n = n;
          g.k = k;
          g.a = da.data();
          g.lda = ta ? m : k;
          g.b = db.data();
          g.ldb = tb ? k : n;
          g.c = dc.data();
          g.ldc = n;
          gemm_lowp(be, g);
          got[t] = dc.download();
        }
        size_t differ = 0;
        for (size_t i = 0; i < got[0].size(); ++i) differ += got[0][i].bits != got[1][i].bits;
        EXPECT_EQ(differ, 0u);
      }
}

TEST_P(CpuLowpKernelsThreaded, GemmSlicesWithStrides) {
  // Views into wider matrices on the split path: padding stays untouched.
  const int m = 130, n = 70, k = 200, lda = 210, ldb = 75, ldc = 81;
  const auto a = fmt.random(rng, static_cast<size_t>(m) * lda), b = fmt.random(rng, static_cast<size_t>(k) * ldb);
  Buffer<lowp16> da(two, a.size()), db(two, b.size()), dc(two, static_cast<size_t>(m) * ldc);
  da.upload(a);
  db.upload(b);
  dc.upload(fmt.poison(dc.count()));
  GemmLowp g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = da.data();
  g.lda = lda;
  g.b = db.data();
  g.ldb = ldb;
  g.c = dc.data();
  g.ldc = ldc;
  gemm_lowp(two, g);
  const auto c = dc.download();
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double t = fmt.widen(a[i * lda + p]) * static_cast<double>(fmt.widen(b[p * ldb + j]));
        s += t;
        mag += std::fabs(t);
      }
      ASSERT_TRUE(close_enough(fmt.widen(c[i * ldc + j]), s, fmt.rel_tol(), 1e-5 * mag + 6e-8));
    }
    for (int j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j].bits, test::kPoisonHalfBits);
  }
}

}  // namespace
}  // namespace ddp
