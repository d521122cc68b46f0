// test_cpu_gemm_to_fp32.cpp: CpuBackend's gemm_lowp_to_fp32 (the FP16 GEMM
// with its FP32 sums left unrounded, row stride ldc) and add_fp32_into_lowp:
//   - rounded to FP16, a beta-0 result is gemm_lowp's bits (the same BLAS
//     calls), on 1 and 2 threads, every transpose, shapes that slice by rows
//     and by columns;
//   - with beta it sums into what C holds: against a double reference within
//     FP32's summation bound (k + 1 roundings of 2^-24 times sum|terms|);
//   - the columns between n and ldc are never written, a beta-0 C never read
//     (poisoned with NaN);
//   - add_fp32_into_lowp is fp16(float(y) + x) per element, bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu_kernel_support.h"
#include "kernels/ops/elementwise.h"
#include "kernels/ops/gemm.h"
#include "kernels/buffer.h"

namespace ddp {
namespace {

using namespace test;  // cpu_kernel_support.h: CpuKernels, inputs

struct Shape {
  bool ta, tb;
  int m, n, k;
};

GemmLowp gemm_of(const Shape& s, const lowp16* a, const lowp16* b, int ldc) {
  GemmLowp g;
  g.trans_a = s.ta ? Transpose::Yes : Transpose::No;
  g.trans_b = s.tb ? Transpose::Yes : Transpose::No;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a;
  g.lda = s.ta ? s.m : s.k;
  g.b = b;
  g.ldb = s.tb ? s.k : s.n;
  g.ldc = ldc;
  return g;
}

// Beta 0 rounded to FP16 is gemm_lowp's C, bit for bit, and the padding
// columns of the FP32 output keep their poison.
void expect_rounds_to_gemm_lowp(const LowpFormat& fmt, CpuBackend& cpu, std::mt19937_64& rng, const Shape& s) {
  SCOPED_TRACE(testing::Message() << "threads " << cpu.threads() << " ta=" << s.ta << " tb=" << s.tb << " m=" << s.m
                                  << " n=" << s.n << " k=" << s.k);
  const int ldc = s.n + 3;
  const auto a = fmt.random(rng, static_cast<size_t>(s.m) * s.k);
  const auto b = fmt.random(rng, static_cast<size_t>(s.k) * s.n);
  Buffer<lowp16> da(cpu, a.size()), db(cpu, b.size()), dc16(cpu, static_cast<size_t>(s.m) * s.n);
  Buffer<float> dc32(cpu, static_cast<size_t>(s.m) * ldc);
  da.upload(a);
  db.upload(b);
  dc16.upload(fmt.poison(dc16.count()));
  dc32.upload(std::vector<float>(dc32.count(), std::numeric_limits<float>::quiet_NaN()));
  GemmLowp g16 = gemm_of(s, da.data(), db.data(), s.n);
  g16.c = dc16.data();
  gemm_lowp(cpu, g16);
  GemmLowpToFp32 g32;
  g32.gemm = gemm_of(s, da.data(), db.data(), ldc);
  g32.c_fp32 = dc32.data();
  gemm_lowp_to_fp32(cpu, g32);
  const auto want = dc16.download();
  const auto got = dc32.download();
  size_t differ = 0, padding_written = 0;
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < ldc; ++j) {
      const float v = got[static_cast<size_t>(i) * ldc + j];
      if (j >= s.n) {
        padding_written += !std::isnan(v);
        continue;
      }
      differ += fmt.narrow(v).bits != want[static_cast<size_t>(i) * s.n + j].bits;
    }
  EXPECT_EQ(differ, 0u) << "of " << s.m * s.n << " rounded results differ from gemm_lowp's";
  EXPECT_EQ(padding_written, 0u) << "columns n..ldc were written";
}

TEST_P(CpuLowpKernelsThreaded, GemmToFp32RoundsToGemmFp16sBits) {
  // Small (one BLAS call), row-sliced (m >= 96) and column-sliced (m < 96,
  // wide n) on two threads; every transpose.
  const int shapes[][3] = {{7, 5, 3}, {300, 64, 200}, {1000, 48, 96}, {40, 700, 150}};
  for (const auto& d : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (CpuBackend* cpu : {&one, &two})
          expect_rounds_to_gemm_lowp(fmt, *cpu, rng, Shape{ta == 1, tb == 1, d[0], d[1], d[2]});
}

// Beta 1 three times over: c = c0 + A1 B1 + A2 B2 + A3 B3 against double,
// within (k_total + 3) 2^-24 sum|terms| (each FP32 add rounds once).
TEST_P(CpuLowpKernelsThreaded, GemmToFp32SumsIntoC) {
  const Shape s{true, false, 1000, 48, 100};  // d_wte's shape: [V, C] += dlogits^T x
  for (CpuBackend* cpu : {&one, &two}) {
    SCOPED_TRACE(testing::Message() << "threads " << cpu->threads());
    const size_t out = static_cast<size_t>(s.m) * s.n;
    const auto c0 = random_floats(rng, out);
    Buffer<float> dc(*cpu, out);
    dc.upload(c0);
    std::vector<double> want(c0.begin(), c0.end()), magnitude(out);
    for (size_t i = 0; i < out; ++i) magnitude[i] = std::fabs(c0[i]);
    for (int part = 0; part < 3; ++part) {
      const auto a = fmt.random(rng, static_cast<size_t>(s.k) * s.m);  // stored [k, m]
      const auto b = fmt.random(rng, static_cast<size_t>(s.k) * s.n);
      Buffer<lowp16> da(*cpu, a.size()), db(*cpu, b.size());
      da.upload(a);
      db.upload(b);
      GemmLowpToFp32 sum;
      sum.gemm = gemm_of(s, da.data(), db.data(), s.n);
      sum.gemm.beta = 1.0f;
      sum.c_fp32 = dc.data();
      gemm_lowp_to_fp32(*cpu, sum);
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j)
          for (int p = 0; p < s.k; ++p) {
            const double t = static_cast<double>(fmt.widen(a[static_cast<size_t>(p) * s.m + i])) *
                             fmt.widen(b[static_cast<size_t>(p) * s.n + j]);
            want[static_cast<size_t>(i) * s.n + j] += t;
            magnitude[static_cast<size_t>(i) * s.n + j] += std::fabs(t);
          }
    }
    const auto got = dc.download();
    const double roundings = 3.0 * s.k + 3.0;
    for (size_t i = 0; i < out; ++i)
      ASSERT_LE(std::fabs(got[i] - want[i]), roundings * std::ldexp(1.0, -24) * magnitude[i])
          << "element " << i << ": " << got[i] << " against " << want[i];
  }
}

TEST_P(CpuLowpKernels, GemmToFp32RefusesAnEpilogueOrAnFp16C) {
  Buffer<lowp16> a(cpu, 4), b(cpu, 4), c(cpu, 4);
  Buffer<float> c32(cpu, 4);
  GemmLowpToFp32 to_fp32;
  to_fp32.gemm = gemm_of(Shape{false, false, 2, 2, 2}, a.data(), b.data(), 2);
  to_fp32.c_fp32 = c32.data();
  GemmLowp& g = to_fp32.gemm;
  g.c = c.data();
  EXPECT_THROW(gemm_lowp_to_fp32(cpu, to_fp32), Error);
  g.c = nullptr;
  g.bias = a.data();
  EXPECT_THROW(gemm_lowp_to_fp32(cpu, to_fp32), Error);
  g.bias = nullptr;
  g.ldc = 1;
  EXPECT_THROW(gemm_lowp_to_fp32(cpu, to_fp32), Error);
}

TEST_P(CpuLowpKernelsThreaded, AddFp32IntoFp16RoundsOnce) {
  const size_t count = 100003;
  const auto y0 = fmt.random(rng, count);
  const auto x = random_floats(rng, count);
  for (CpuBackend* cpu : {&one, &two}) {
    Buffer<lowp16> y(*cpu, count);
    Buffer<float> dx(*cpu, count);
    y.upload(y0);
    dx.upload(x);
    AddFp32IntoLowp add;
    add.src = dx.data();
    add.y = y.data();
    add.count = count;
    add_fp32_into_lowp(*cpu, add);
    const auto got = y.download();
    size_t differ = 0;
    for (size_t i = 0; i < count; ++i) differ += got[i].bits != fmt.narrow(fmt.widen(y0[i]) + x[i]).bits;
    EXPECT_EQ(differ, 0u) << "on " << cpu->threads() << " threads";
  }
}

}  // namespace
}  // namespace ddp
