// cuda_test_gemm.cpp: CudaBackend's 16-bit GEMM (FP16, BF16) against CpuBackend's on the
// same inputs: every transpose, odd shapes, alpha and beta, bias, padded
// strides and 2-byte-aligned views, long sums, plan reuse, k = 0 and empty
// outputs, and the CUDA-core fallback kernel. Tolerances: cuda_test_support.h.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/ops/gemm.h"

namespace ddp {
namespace {

using namespace test;  // cuda_test_support.h: CudaKernels, comparisons, tolerances

// ---- GEMM -------------------------------------------------------------------------

struct GemmCase {
  int m, n, k;
  Transpose trans_a = Transpose::No, trans_b = Transpose::No;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  int pad = 0;        // extra elements per stored row (lda/ldb/ldc beyond the minimum)
  size_t offset = 0;  // elements: an odd offset makes every pointer only 2-byte aligned
};

std::string describe(const GemmCase& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " trans_a=" + (c.trans_a == Transpose::Yes ? "T" : "N") +
         " trans_b=" + (c.trans_b == Transpose::Yes ? "T" : "N") + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " bias=" + (c.bias ? "yes" : "no") + " pad=" + std::to_string(c.pad) +
         " offset=" + std::to_string(c.offset);
}

void run_gemm_case(CpuBackend& cpu, CudaBackend& gpu, std::mt19937_64& rng, const GemmCase& c) {
  SCOPED_TRACE(describe(c));
  const LowpFormat fmt{gpu.precision()};
  const bool a_t = c.trans_a == Transpose::Yes, b_t = c.trans_b == Transpose::Yes;
  const int a_rows = a_t ? c.k : c.m, a_cols = a_t ? c.m : c.k;
  const int b_rows = b_t ? c.n : c.k, b_cols = b_t ? c.k : c.n;
  const int lda = std::max(a_cols, 1) + c.pad, ldb = std::max(b_cols, 1) + c.pad, ldc = c.n + c.pad;
  const auto a = fmt.random(rng, c.offset + static_cast<size_t>(a_rows) * lda);
  const auto b = fmt.random(rng, c.offset + static_cast<size_t>(b_rows) * ldb);
  const size_t c_count = c.offset + static_cast<size_t>(c.m) * ldc;
  // beta == 0 must not read C: poison it (NaN would propagate if read).
  const auto c0 = c.beta != 0.0f ? fmt.random(rng, c_count) : test::poison_halves(c_count);
  const auto bias = fmt.random(rng, c.offset + static_cast<size_t>(c.n));
  std::vector<double> magnitude_sum;

  std::vector<lowp16> outputs[2];
  for (int side = 0; side < 3; ++side) {
    // Side 2 runs the CPU GEMM on |A|, |B|, |C| with |alpha|, |beta|: the
    // per-element magnitude sum|alpha a b| + |beta c| for the tolerance
    // floor (exact operands; its own 16-bit rounding is irrelevant there).
    Backend& be = side == 1 ? static_cast<Backend&>(gpu) : static_cast<Backend&>(cpu);
    const bool magnitude = side == 2;
    auto abs_of = [](std::vector<lowp16> v) {
      for (lowp16& h : v) h.bits &= 0x7fff;
      return v;
    };
    Buffer<lowp16> da(be, a.size()), db(be, b.size()), dc(be, c0.size()), dbias(be, bias.size());
    da.upload(magnitude ? abs_of(a) : a);
    db.upload(magnitude ? abs_of(b) : b);
    dc.upload(magnitude && c.beta != 0.0f ? abs_of(c0) : c0);
    dbias.upload(bias);
    GemmLowp g;
    g.trans_a = c.trans_a;
    g.trans_b = c.trans_b;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.alpha = magnitude ? std::fabs(c.alpha) : c.alpha;
    g.beta = magnitude ? std::fabs(c.beta) : c.beta;
    g.a = da.data() + c.offset;
    g.lda = lda;
    g.b = db.data() + c.offset;
    g.ldb = ldb;
    g.c = dc.data() + c.offset;
    g.ldc = ldc;
    g.bias = c.bias && !magnitude ? dbias.data() + c.offset : nullptr;
    gemm_lowp(be, g);
    if (magnitude) {
      const auto mag = dc.download();
      magnitude_sum.assign(c_count, 0.0);
      for (size_t idx = c.offset; idx < c_count; ++idx) {
        const size_t j = (idx - c.offset) % ldc;
        if (static_cast<int>(j) < c.n)
          magnitude_sum[idx] = fmt.widen(mag[idx]) + (c.bias ? std::fabs(fmt.widen(bias[c.offset + j])) : 0.0);
      }
    } else {
      outputs[side] = dc.download();
    }
  }
  const auto& want = outputs[0];
  const auto& got = outputs[1];

  // Compare the m x n window; padding and the offset prefix must be untouched.
  std::vector<lowp16> got_window, want_window, got_rest, want_rest;
  std::vector<double> window_magnitude;
  for (size_t idx = 0; idx < c_count; ++idx) {
    const bool inside = idx >= c.offset && static_cast<int>((idx - c.offset) % ldc) < c.n;
    if (inside) {
      got_window.push_back(got[idx]);
      want_window.push_back(want[idx]);
      window_magnitude.push_back(magnitude_sum[idx]);
    } else {
      got_rest.push_back(got[idx]);
      want_rest.push_back(c0[idx]);
    }
  }
  expect_close(
      fmt, got_window, want_window, fmt.rel_tol(),
      [&](size_t i) { return 1e-5 * window_magnitude[i] + kFp16SubnormalStep; }, "C");
  expect_halves_equal(fmt, got_rest, want_rest, "C outside the m x n window");
}

TEST_P(CudaLowpKernels, GemmAllTransposesOddShapes) {
  SCOPED_TRACE(seed_text());
  const int shapes[][3] = {{1, 1, 1},     {3, 17, 5},    {17, 3, 1031}, {1, 1003, 3},
                           {1033, 17, 3}, {64, 33, 129}, {5, 1031, 7}};
  for (const auto& s : shapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth) {
        GemmCase c{s[0], s[1], s[2]};
        c.trans_a = ta;
        c.trans_b = tb;
        run_gemm_case(cpu, *gpu, rng, c);
      }
}

TEST_P(CudaLowpKernels, GemmAlphaBeta) {
  SCOPED_TRACE(seed_text());
  const float alpha_beta[][2] = {{0.5f, 0.0f}, {1.0f, 1.0f}, {-2.0f, 0.25f}, {1.5f, -0.75f}};
  for (const auto& ab : alpha_beta)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth) {
        GemmCase c{37, 29, 65};
        c.trans_a = ta;
        c.trans_b = tb;
        c.alpha = ab[0];
        c.beta = ab[1];
        run_gemm_case(cpu, *gpu, rng, c);
      }
}

TEST_P(CudaLowpKernels, GemmBiasEpilogue) {
  SCOPED_TRACE(seed_text());
  // Forward layers are X W^T + b (trans_b = Yes); the others must hold too.
  const int shapes[][3] = {{1, 1, 1}, {45, 130, 200}, {5, 3, 1000}, {256, 512, 784}, {1031, 10, 17}};
  for (const auto& s : shapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth)
        for (float alpha : {1.0f, 0.75f}) {
          GemmCase c{s[0], s[1], s[2]};
          c.trans_a = ta;
          c.trans_b = tb;
          c.alpha = alpha;
          c.bias = true;
          run_gemm_case(cpu, *gpu, rng, c);
        }
}

TEST_P(CudaLowpKernels, GemmPaddedStridesAndUnalignedViews) {
  SCOPED_TRACE(seed_text());
  // Views into the flat parameter buffers can start at any element: 2-byte
  // aligned A, B, C and bias (the bias is then staged to an aligned copy).
  for (size_t offset : {size_t{0}, size_t{1}, size_t{3}})
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth)
        for (bool bias : {false, true}) {
          GemmCase c{31, 47, 129};
          c.trans_a = ta;
          c.trans_b = tb;
          c.pad = 3;
          c.offset = offset;
          c.bias = bias;
          c.beta = bias ? 0.0f : 0.5f;
          run_gemm_case(cpu, *gpu, rng, c);
        }
}

TEST_P(CudaLowpKernels, GemmLongKKeepsFp32Sums) {
  SCOPED_TRACE(seed_text());
  // Few outputs, long dot products: where cuBLASLt likes split-K. Partial
  // sums rounded to FP16 would break the tolerance; FP32 ones do not (in BF16
  // the tolerance is too coarse to tell: the reduction-scheme mask of
  // cuda_gemm.cpp is what keeps the partial sums FP32 there).
  for (Transpose ta : kBoth)
    for (Transpose tb : kBoth) {
      GemmCase c{16, 16, 8192};
      c.trans_a = ta;
      c.trans_b = tb;
      run_gemm_case(cpu, *gpu, rng, c);
    }
}

TEST_P(CudaLowpKernels, GemmPlanReuseWithNewData) {
  SCOPED_TRACE(seed_text());
  // Same shape three times: the cached plan must pick up new pointers, alpha
  // and bias each call.
  for (int rep = 0; rep < 3; ++rep) {
    GemmCase c{64, 96, 80};
    c.trans_b = Transpose::Yes;
    c.alpha = 1.0f + 0.5f * rep;
    c.bias = rep != 1;
    run_gemm_case(cpu, *gpu, rng, c);
  }
}

TEST_P(CudaLowpKernels, GemmZeroKAndEmpty) {
  SCOPED_TRACE(seed_text());
  GemmCase c{7, 9, 0};
  c.beta = 0.5f;
  run_gemm_case(cpu, *gpu, rng, c);  // C = beta C
  c.beta = 0.0f;
  c.bias = true;
  run_gemm_case(cpu, *gpu, rng, c);  // C = bias
  GemmCase empty{0, 5, 3};
  run_gemm_case(cpu, *gpu, rng, empty);
}

TEST_P(CudaLowpKernels, GemmSimpleFallbackKernel) {
  SCOPED_TRACE(seed_text());
  // The CUDA-core kernel used where cuBLASLt has no algorithm.
  gpu->force_simple_gemm_for_testing(true);
  const int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {70, 33, 300}};
  for (const auto& s : shapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth) {
        GemmCase c{s[0], s[1], s[2]};
        c.trans_a = ta;
        c.trans_b = tb;
        c.alpha = 0.75f;
        c.pad = 1;
        run_gemm_case(cpu, *gpu, rng, c);
        c.bias = true;
        c.offset = 1;
        run_gemm_case(cpu, *gpu, rng, c);
        c.bias = false;
        c.beta = -0.5f;
        run_gemm_case(cpu, *gpu, rng, c);
      }
  gpu->force_simple_gemm_for_testing(false);
}

}  // namespace
}  // namespace ddp
