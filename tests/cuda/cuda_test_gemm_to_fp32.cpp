// cuda_test_gemm_to_fp32.cpp: CudaBackend's gemm_lowp_to_fp32 (cuBLASLt,
// 16-bit A and B, FP32 C and D) and add_fp32_into_lowp against CpuBackend's
// on the same inputs: every transpose, d_wte's shape (a transposed A of
// [rows, V]) summed into C three times with beta 1, a padded ldc whose
// columns past n stay poisoned, and k = 0. The GEMM's FP32 sums differ in
// order only: within (k + 1) 2^-24 sum|terms| per element, sum|terms| from
// the CPU GEMM on |A| and |B|. The add rounds once on both: bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/gemm.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons

GemmLowp gemm_of(bool ta, bool tb, int m, int n, int k, int ldc) {
  GemmLowp g;
  g.trans_a = ta ? Transpose::Yes : Transpose::No;
  g.trans_b = tb ? Transpose::Yes : Transpose::No;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = ta ? m : k;
  g.ldb = tb ? k : n;
  g.ldc = ldc;
  return g;
}

std::vector<lowp16> absolute(std::vector<lowp16> v) {
  for (lowp16& h : v) h.bits &= 0x7fff;
  return v;
}

TEST_P(CudaLowpKernels, GemmToFp32MatchesTheCpu) {
  SCOPED_TRACE(seed_text());
  struct Case {
    bool ta, tb;
    int m, n, k, pad, parts;
  };
  const Case cases[] = {{false, false, 33, 17, 65, 3, 1},
                        {true, false, 1000, 48, 300, 0, 3},
                        {false, true, 96, 130, 64, 5, 1},
                        {true, true, 7, 9, 11, 1, 2},
                        {true, false, 50304, 64, 128, 0, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                 " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " pad=" + std::to_string(c.pad));
    const int ldc = c.n + c.pad;
    const size_t out = static_cast<size_t>(c.m) * ldc;
    std::vector<float> start(out, std::numeric_limits<float>::quiet_NaN());
    auto acc = both(start);
    Buffer<float> magnitude(cpu, out);
    magnitude.upload(std::vector<float>(out, 0.0f));
    for (int part = 0; part < c.parts; ++part) {
      const auto a = fmt.random(rng, static_cast<size_t>(c.m) * c.k);
      const auto b = fmt.random(rng, static_cast<size_t>(c.k) * c.n);
      auto da = both(a);
      auto db = both(b);
      Buffer<lowp16> abs_a(cpu, a.size()), abs_b(cpu, b.size());
      abs_a.upload(absolute(a));
      abs_b.upload(absolute(b));
      GemmLowpToFp32 sum;
      sum.gemm = gemm_of(c.ta, c.tb, c.m, c.n, c.k, ldc);
      sum.gemm.beta = part == 0 ? 0.0f : 1.0f;  // beta 0 never reads the NaN start
      sum.gemm.a = da.cpu.data();
      sum.gemm.b = db.cpu.data();
      sum.c_fp32 = acc.cpu.data();
      gemm_lowp_to_fp32(cpu, sum);
      GemmLowpToFp32 sum_abs = sum;
      sum_abs.gemm.a = abs_a.data();
      sum_abs.gemm.b = abs_b.data();
      sum_abs.c_fp32 = magnitude.data();
      gemm_lowp_to_fp32(cpu, sum_abs);
      sum.gemm.a = da.gpu.data();
      sum.gemm.b = db.gpu.data();
      sum.c_fp32 = acc.gpu.data();
      gemm_lowp_to_fp32(*gpu, sum);
    }
    const auto got = acc.gpu.download(), want = acc.cpu.download(), mag = magnitude.download();
    const double bound = (static_cast<double>(c.k) * c.parts + c.parts + 1) * std::ldexp(1.0, -24);
    size_t bad = 0, padding_written = 0;
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < ldc; ++j) {
        const size_t at = static_cast<size_t>(i) * ldc + j;
        if (j >= c.n) {
          padding_written += !std::isnan(got[at]);
          continue;
        }
        bad += !(std::fabs(got[at] - want[at]) <= bound * 2 * mag[at]);
      }
    EXPECT_EQ(bad, 0u) << "elements beyond the FP32 summation bound";
    EXPECT_EQ(padding_written, 0u) << "columns n..ldc were written";
  }
}

TEST_P(CudaLowpKernels, GemmToFp32WithNoSumsZeroesOrKeepsC) {
  const auto start = random_floats(rng, 12, -1.0f, 1.0f);
  for (const float beta : {0.0f, 1.0f}) {
    auto c = both(start);
    GemmLowpToFp32 no_sums;
    no_sums.gemm = gemm_of(false, false, 3, 4, 0, 4);
    no_sums.gemm.beta = beta;
    no_sums.c_fp32 = c.gpu.data();
    gemm_lowp_to_fp32(*gpu, no_sums);
    const auto got = c.gpu.download();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], beta == 0.0f ? 0.0f : start[i]) << i;
  }
}

TEST_P(CudaLowpKernels, AddFp32IntoFp16RoundsAsTheCpu) {
  SCOPED_TRACE(seed_text());
  const size_t count = 100003;
  auto y = both(fmt.random(rng, count));
  auto x = both(random_floats(rng, count, -4.0f, 4.0f));
  AddFp32IntoLowp add;
  add.count = count;
  add.src = x.cpu.data();
  add.y = y.cpu.data();
  add_fp32_into_lowp(cpu, add);
  add.src = x.gpu.data();
  add.y = y.gpu.data();
  add_fp32_into_lowp(*gpu, add);
  expect_halves_equal(fmt, y.gpu.download(), y.cpu.download(), "fp16(y + x)");
}

}  // namespace
}  // namespace ddp
