// cuda_test_kernels.cpp: every CudaBackend method against CpuBackend (the
// reference, itself checked in test_cpu_kernels.cpp) on the same fresh random
// inputs, outputs poisoned before each run. Every CudaKernels test skips with
// the reason where no GPU is visible; the CudaCheckMacros and CudaDeviceQuery
// tests need no GPU and run everywhere CUDA is built.
//
// Tolerances, stated once (both sides compute in FP32, so we compare the two
// implementations with each other, not with an exact value):
// - Same FP32 operations in the same order (add_bias, ReLU, casts, unscale):
//   bitwise equal.
// - GEMM: both sum exact products in FP32, but in different orders (Tensor
//   Core MMA steps, truncating adds, vs OpenBLAS's blocking), so the FP32
//   sums differ by up to ~k * 2^-24 * sum|terms| and the FP16 outputs by 1-2
//   FP16 ulps: kFp16RelTol relative plus 1e-5 * sum|terms| + 6e-8 (one FP16
//   subnormal step) absolute, as test_cpu_kernels.cpp allows against double.
// - Transcendental kernels (GELU, softmax): CUDA's erff/expf/logf and
//   glibc's differ in the last FP32 bits; after rounding to FP16 that is at
//   most one FP16 ulp (kFp16RelTol) plus a small absolute floor where the
//   result cancels (1 + erf(z) for z << 0, p - 1 near a certain class).
// - FP32 loss reductions: CpuBackend sums sequentially in FP32 (relative
//   error up to count * 2^-24 for positive terms), CUDA in a tree (double
//   across rows), so we allow max(kFp32RelTol, 2 * count * 2^-24) relative.
//   Bias grad (FP32 column sums, FP16 result) gets the GEMM rule with
//   sum|terms| <= rows. L2 norm: both accumulate in double, kFp32RelTol.
// - SGD: nvcc contracts a*b+c into FMA, g++ (ISO C++, no -mfma) does not, so
//   FP32 masters and momenta differ by ~1 FP32 ulp of the terms: kFp32RelTol
//   plus 1e-6 absolute; the FP16 re-cast may then flip by one FP16 ulp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu_backend.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_gemm_route.h"
#include "kernels/device_query.h"
#include "trainer/mlp_model.h"
#include "trainer/parameter_store.h"
#include "gemm_epilogue_support.h"
#include "test_support.h"

namespace ddp {
namespace {

using test::close_enough;
using test::kFp16RelTol;
using test::kFp32RelTol;

constexpr double kFp16SubnormalStep = 6e-8;  // 2^-24

std::string seed_text() {
  return "seed " + std::to_string(test::test_seed()) + " (set DDP_TEST_SEED to reproduce)";
}

// Tolerance of an FP32 sum over `count` terms computed by two different
// orders (see the header comment).
double fp32_sum_rel_tol(size_t count) {
  return std::max(kFp32RelTol, 2.0 * static_cast<double>(count) * std::ldexp(1.0, -24));
}

class CudaKernels : public ::testing::Test {
 protected:
  CudaKernels() : rng(test::test_seed()) {}
  void SetUp() override {
    std::string why;
    if (visible_cuda_devices(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
    gpu = std::make_unique<CudaBackend>(0);
  }

  // The same host data on both backends.
  template <class T>
  struct Pair {
    Buffer<T> cpu, gpu;
  };
  template <class T>
  Pair<T> both(const std::vector<T>& host) {
    Pair<T> p{Buffer<T>(cpu, host.size()), Buffer<T>(*gpu, host.size())};
    p.cpu.upload(host);
    p.gpu.upload(host);
    return p;
  }

  CpuBackend cpu;  // default: leaves the BLAS thread count alone
  std::unique_ptr<CudaBackend> gpu;
  std::mt19937_64 rng;
};

bool same_half(half16 a, half16 b) {
  const bool a_nan = std::isnan(to_float(a)), b_nan = std::isnan(to_float(b));
  // NaN payloads differ (the CUDA intrinsic returns a canonical NaN).
  return (a_nan || b_nan) ? (a_nan && b_nan) : a.bits == b.bits;
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

// Reports the first few mismatches and the total.
void expect_halves_equal(const std::vector<half16>& got, const std::vector<half16>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_half(got[i], want[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda 0x" << std::hex << got[i].bits << " cpu 0x" << want[i].bits
                    << std::dec;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ";
}

void expect_floats_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_float(got[i], want[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda " << got[i] << " cpu " << want[i];
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ";
}

// abs_floor(i) gives the absolute floor for element i.
template <class T, class Floor>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double rel, Floor abs_floor,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g, w;
    if constexpr (std::is_same_v<T, half16>) {
      g = to_float(got[i]), w = to_float(want[i]);
    } else {
      g = got[i], w = want[i];
    }
    if (!close_enough(g, w, rel, abs_floor(i)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda " << g << " cpu " << w << " (diff " << g - w << ")";
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " outside tolerance";
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double rel, double abs_floor,
                  const std::string& what) {
  expect_close(got, want, rel, [abs_floor](size_t) { return abs_floor; }, what);
}

std::vector<float> nan_floats(size_t count) { return std::vector<float>(count, std::nanf("")); }

// ---- memory ---------------------------------------------------------------------

TEST_F(CudaKernels, MemoryCopiesAndFill) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const auto host = test::random_floats(rng, n);
  Buffer<float> a(*gpu, n), b(*gpu, n);
  a.upload(host);
  EXPECT_EQ(a.download(), host);
  gpu->copy_on_device(b.data(), a.data(), n * sizeof(float));
  auto want = host;
  // Zero an odd, unaligned sub-range of b.
  const size_t first = 7, count = 5001;
  gpu->fill_zero(b.data() + first, count * sizeof(float));
  for (size_t i = first; i < first + count; ++i) want[i] = 0.0f;
  EXPECT_EQ(b.download(), want);
  // Zero-byte operations are no-ops.
  gpu->copy_on_device(b.data(), a.data(), 0);
  gpu->fill_zero(b.data(), 0);
  gpu->synchronize();
  EXPECT_EQ(b.download(), want);
  EXPECT_EQ(gpu->kind(), DeviceKind::Cuda);
  EXPECT_NE(gpu->description().find("CUDA device 0"), std::string::npos) << gpu->description();
}

// ---- GEMM -------------------------------------------------------------------------

struct GemmCase {
  int m, n, k;
  Transpose trans_a = Transpose::No, trans_b = Transpose::No;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  int pad = 0;          // extra elements per stored row (lda/ldb/ldc beyond the minimum)
  size_t offset = 0;    // elements: an odd offset makes every pointer only 2-byte aligned
};

std::string describe(const GemmCase& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " trans_a=" + (c.trans_a == Transpose::Yes ? "T" : "N") + " trans_b=" +
         (c.trans_b == Transpose::Yes ? "T" : "N") + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " bias=" + (c.bias ? "yes" : "no") + " pad=" + std::to_string(c.pad) +
         " offset=" + std::to_string(c.offset);
}

void run_gemm_case(CpuBackend& cpu, CudaBackend& gpu, std::mt19937_64& rng, const GemmCase& c) {
  SCOPED_TRACE(describe(c));
  const bool a_t = c.trans_a == Transpose::Yes, b_t = c.trans_b == Transpose::Yes;
  const int a_rows = a_t ? c.k : c.m, a_cols = a_t ? c.m : c.k;
  const int b_rows = b_t ? c.n : c.k, b_cols = b_t ? c.k : c.n;
  const int lda = std::max(a_cols, 1) + c.pad, ldb = std::max(b_cols, 1) + c.pad, ldc = c.n + c.pad;
  const auto a = test::random_halves(rng, c.offset + static_cast<size_t>(a_rows) * lda);
  const auto b = test::random_halves(rng, c.offset + static_cast<size_t>(b_rows) * ldb);
  const size_t c_count = c.offset + static_cast<size_t>(c.m) * ldc;
  // beta == 0 must not read C: poison it (NaN would propagate if read).
  const auto c0 = c.beta != 0.0f ? test::random_halves(rng, c_count) : test::poison_halves(c_count);
  const auto bias = test::random_halves(rng, c.offset + static_cast<size_t>(c.n));
  std::vector<double> magnitude_sum;

  std::vector<half16> outputs[2];
  for (int side = 0; side < 3; ++side) {
    // Side 2 runs the CPU GEMM on |A|, |B|, |C| with |alpha|, |beta|: the
    // per-element magnitude sum|alpha a b| + |beta c| for the tolerance
    // floor (exact operands; its own FP16 rounding is irrelevant there).
    Backend& be = side == 1 ? static_cast<Backend&>(gpu) : static_cast<Backend&>(cpu);
    const bool magnitude = side == 2;
    auto abs_of = [](std::vector<half16> v) {
      for (half16& h : v) h.bits &= 0x7fff;
      return v;
    };
    Buffer<half16> da(be, a.size()), db(be, b.size()), dc(be, c0.size()), dbias(be, bias.size());
    da.upload(magnitude ? abs_of(a) : a), db.upload(magnitude ? abs_of(b) : b);
    dc.upload(magnitude && c.beta != 0.0f ? abs_of(c0) : c0), dbias.upload(bias);
    GemmFp16 g;
    g.trans_a = c.trans_a, g.trans_b = c.trans_b;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.alpha = magnitude ? std::fabs(c.alpha) : c.alpha;
    g.beta = magnitude ? std::fabs(c.beta) : c.beta;
    g.a = da.data() + c.offset, g.lda = lda;
    g.b = db.data() + c.offset, g.ldb = ldb;
    g.c = dc.data() + c.offset, g.ldc = ldc;
    g.bias = c.bias && !magnitude ? dbias.data() + c.offset : nullptr;
    be.gemm_fp16(g);
    if (magnitude) {
      const auto mag = dc.download();
      magnitude_sum.assign(c_count, 0.0);
      for (size_t idx = c.offset; idx < c_count; ++idx) {
        const size_t j = (idx - c.offset) % ldc;
        if (static_cast<int>(j) < c.n)
          magnitude_sum[idx] = to_float(mag[idx]) + (c.bias ? std::fabs(to_float(bias[c.offset + j])) : 0.0);
      }
    } else {
      outputs[side] = dc.download();
    }
  }
  const auto& want = outputs[0];
  const auto& got = outputs[1];

  // Compare the m x n window; padding and the offset prefix must be untouched.
  std::vector<half16> got_window, want_window, got_rest, want_rest;
  std::vector<double> window_magnitude;
  for (size_t idx = 0; idx < c_count; ++idx) {
    const bool inside = idx >= c.offset && static_cast<int>((idx - c.offset) % ldc) < c.n;
    if (inside) {
      got_window.push_back(got[idx]), want_window.push_back(want[idx]);
      window_magnitude.push_back(magnitude_sum[idx]);
    } else {
      got_rest.push_back(got[idx]), want_rest.push_back(c0[idx]);
    }
  }
  expect_close(got_window, want_window, kFp16RelTol,
               [&](size_t i) { return 1e-5 * window_magnitude[i] + kFp16SubnormalStep; }, "C");
  expect_halves_equal(got_rest, want_rest, "C outside the m x n window");
}

const Transpose kBoth[] = {Transpose::No, Transpose::Yes};

TEST_F(CudaKernels, GemmAllTransposesOddShapes) {
  SCOPED_TRACE(seed_text());
  const int shapes[][3] = {{1, 1, 1},   {3, 17, 5},   {17, 3, 1031}, {1, 1003, 3},
                           {1033, 17, 3}, {64, 33, 129}, {5, 1031, 7}};
  for (const auto& s : shapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth) {
        GemmCase c{s[0], s[1], s[2]};
        c.trans_a = ta, c.trans_b = tb;
        run_gemm_case(cpu, *gpu, rng, c);
      }
}

TEST_F(CudaKernels, GemmAlphaBeta) {
  SCOPED_TRACE(seed_text());
  const float alpha_beta[][2] = {{0.5f, 0.0f}, {1.0f, 1.0f}, {-2.0f, 0.25f}, {1.5f, -0.75f}};
  for (const auto& ab : alpha_beta)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth) {
        GemmCase c{37, 29, 65};
        c.trans_a = ta, c.trans_b = tb, c.alpha = ab[0], c.beta = ab[1];
        run_gemm_case(cpu, *gpu, rng, c);
      }
}

TEST_F(CudaKernels, GemmBiasEpilogue) {
  SCOPED_TRACE(seed_text());
  // Forward layers are X W^T + b (trans_b = Yes); the others must hold too.
  const int shapes[][3] = {{1, 1, 1}, {45, 130, 200}, {5, 3, 1000}, {256, 512, 784}, {1031, 10, 17}};
  for (const auto& s : shapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth)
        for (float alpha : {1.0f, 0.75f}) {
          GemmCase c{s[0], s[1], s[2]};
          c.trans_a = ta, c.trans_b = tb, c.alpha = alpha, c.bias = true;
          run_gemm_case(cpu, *gpu, rng, c);
        }
}

TEST_F(CudaKernels, GemmPaddedStridesAndUnalignedViews) {
  SCOPED_TRACE(seed_text());
  // Views into the flat parameter buffers can start at any element: 2-byte
  // aligned A, B, C and bias (the bias is then staged to an aligned copy).
  for (size_t offset : {size_t{0}, size_t{1}, size_t{3}})
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth)
        for (bool bias : {false, true}) {
          GemmCase c{31, 47, 129};
          c.trans_a = ta, c.trans_b = tb, c.pad = 3, c.offset = offset, c.bias = bias;
          c.beta = bias ? 0.0f : 0.5f;
          run_gemm_case(cpu, *gpu, rng, c);
        }
}

TEST_F(CudaKernels, GemmLongKKeepsFp32Sums) {
  SCOPED_TRACE(seed_text());
  // Few outputs, long dot products: where cuBLASLt likes split-K. Partial
  // sums rounded to FP16 would break the tolerance; FP32 ones do not.
  for (Transpose ta : kBoth)
    for (Transpose tb : kBoth) {
      GemmCase c{16, 16, 8192};
      c.trans_a = ta, c.trans_b = tb;
      run_gemm_case(cpu, *gpu, rng, c);
    }
}

TEST_F(CudaKernels, GemmPlanReuseWithNewData) {
  SCOPED_TRACE(seed_text());
  // Same shape three times: the cached plan must pick up new pointers, alpha
  // and bias each call.
  for (int rep = 0; rep < 3; ++rep) {
    GemmCase c{64, 96, 80};
    c.trans_b = Transpose::Yes, c.alpha = 1.0f + 0.5f * rep, c.bias = rep != 1;
    run_gemm_case(cpu, *gpu, rng, c);
  }
}

TEST_F(CudaKernels, GemmZeroKAndEmpty) {
  SCOPED_TRACE(seed_text());
  GemmCase c{7, 9, 0};
  c.beta = 0.5f;
  run_gemm_case(cpu, *gpu, rng, c);  // C = beta C
  c.beta = 0.0f, c.bias = true;
  run_gemm_case(cpu, *gpu, rng, c);  // C = bias
  GemmCase empty{0, 5, 3};
  run_gemm_case(cpu, *gpu, rng, empty);
}

TEST_F(CudaKernels, GemmSimpleFallbackKernel) {
  SCOPED_TRACE(seed_text());
  // The CUDA-core kernel used where cuBLASLt has no algorithm.
  gpu->force_simple_gemm_for_testing(true);
  const int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {70, 33, 300}};
  for (const auto& s : shapes)
    for (Transpose ta : kBoth)
      for (Transpose tb : kBoth) {
        GemmCase c{s[0], s[1], s[2]};
        c.trans_a = ta, c.trans_b = tb, c.alpha = 0.75f, c.pad = 1;
        run_gemm_case(cpu, *gpu, rng, c);
        c.bias = true, c.offset = 1;
        run_gemm_case(cpu, *gpu, rng, c);
        c.bias = false, c.beta = -0.5f;
        run_gemm_case(cpu, *gpu, rng, c);
      }
  gpu->force_simple_gemm_for_testing(false);
}

// ---- GEMM epilogues ---------------------------------------------------------------
// Activation, pre-activation output, activation gradient and bias gradient of
// A (backend.h, gemm_epilogue.h) against CpuBackend on the same inputs. The
// C and pre-activation tolerance is the GEMM rule above with the summation
// floor scaled by the largest |act'| (1.13, GELU), the bias gradient's the
// bias-grad rule (sum|terms| of the k values summed): BGRADB and the
// column-sum kernel (16 row lanes, each summing every 16th of the k terms,
// then the lanes in order) both sum in another order than the CPU's. The
// kernel's own FP32 error is at most (k/16 + 16) * 2^-24 * sum|terms|
// (< 2e-6 * sum|terms| for the k <= 256 here), the CPU's is checked against
// double to 1e-5 * sum|terms| (test_gemm_epilogues.cpp), and rounding
// errors of random sign make both far smaller in practice. Magnitudes come from
// the double reference of gemm_epilogue_support.h. CUDA's erff/expf and
// glibc's differ by up to 2 FP32 ulps each: in GELU and most of its gradient
// that is far inside kFp16RelTol, but gelu'(z) = cdf + z pdf cancels near
// z = -0.7518, where the slope's relative error reaches ~4e-4 while the
// summation floor (scaled by |gelu'|) vanishes; the reference's absolute
// c_slope_error, 4 * 2^-24 * (|cdf| + |z pdf|) * |v| (~1e-7 * |v|), covers it.

void run_epilogue_case(CpuBackend& cpu, Backend& gpu, std::mt19937_64& rng, const test::EpilogueCase& c,
                       const std::string& what) {
  SCOPED_TRACE(what + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
               " ta=" + std::to_string(c.trans_a == Transpose::Yes) + " tb=" +
               std::to_string(c.trans_b == Transpose::Yes) + " pad=" + std::to_string(c.pad) +
               " offset=" + std::to_string(c.offset));
  const auto in = test::make_epilogue_inputs(rng, c);
  const auto want = test::run_epilogue_case(cpu, c, in);
  const auto got = test::run_epilogue_case(gpu, c, in);
  const auto ref = test::epilogue_reference(c, in);
  // Window elements against the CPU; everything outside the window must
  // still hold what it held (C: c0; pre-activation: poison).
  std::vector<half16> got_c, want_c, got_pre, want_pre, got_rest, want_rest;
  std::vector<double> floor;
  for (size_t idx = 0; idx < c.c_count(); ++idx) {
    const bool inside = idx >= c.offset && static_cast<int>((idx - c.offset) % c.ldc()) < c.n;
    if (!inside) {
      got_rest.push_back(got.c[idx]), want_rest.push_back(in.c0[idx]);
      if (c.pre_activation) got_rest.push_back(got.pre_activation[idx]), want_rest.push_back(want.pre_activation[idx]);
      continue;
    }
    const size_t i = (idx - c.offset) / c.ldc(), j = (idx - c.offset) % c.ldc();
    floor.push_back(1e-5 * ref.c_magnitude[i * c.n + j] + ref.c_slope_error[i * c.n + j] + kFp16SubnormalStep);
    got_c.push_back(got.c[idx]), want_c.push_back(want.c[idx]);
    if (c.pre_activation) got_pre.push_back(got.pre_activation[idx]), want_pre.push_back(want.pre_activation[idx]);
  }
  expect_close(got_c, want_c, kFp16RelTol, [&](size_t i) { return floor[i]; }, "C");
  if (c.pre_activation) expect_close(got_pre, want_pre, kFp16RelTol, [&](size_t i) { return floor[i]; }, "pre-activation");
  expect_halves_equal(got_rest, want_rest, "outside the m x n window");
  if (c.bias_grad) {
    std::vector<half16> got_db(got.bias_grad.begin() + c.offset, got.bias_grad.end()),
        want_db(want.bias_grad.begin() + c.offset, want.bias_grad.end());
    expect_close(got_db, want_db, kFp16RelTol,
                 [&](size_t i) { return 1e-5 * ref.bias_grad_magnitude[i] + kFp16SubnormalStep; }, "bias_grad");
  }
}

// The model's three GEMMs (784-1024-1024-10 at batch 256, and odd widths)
// with their epilogues, plus odd shapes, every transpose, padded strides and
// 2-byte-aligned views (offset 1: cuBLASLt gets other algorithms or none).
void run_all_epilogues(CpuBackend& cpu, Backend& gpu, std::mt19937_64& rng) {
  // (The double reference behind the tolerances is the slow part: the full
  // batch runs once per epilogue, the unaligned views on a small batch.)
  const int layers[][2] = {{784, 1024}, {1024, 10}, {33, 17}};  // {in, out}
  for (const auto& l : layers)
    for (int rows : {256, 7})
      for (size_t offset : {size_t{0}, size_t{1}}) {
        if (rows == 256 && offset != 0) continue;
        const int in = l[0], out = l[1];
        for (Activation act : {Activation::Relu, Activation::Gelu}) {
          test::EpilogueCase fwd{rows, out, in};  // Y = act(X W^T + b) (+ Z)
          fwd.trans_b = Transpose::Yes, fwd.bias = true, fwd.act = act, fwd.offset = offset;
          fwd.pre_activation = act == Activation::Gelu;
          run_epilogue_case(cpu, gpu, rng, fwd, "forward");
          if (rows != 256) {
            fwd.pre_activation = !fwd.pre_activation, fwd.pad = 3;
            run_epilogue_case(cpu, gpu, rng, fwd, "forward, other pre-activation choice");
          }
          test::EpilogueCase dx{rows, in, out};  // dZ_prev = act'(Z) * (dZ W)
          dx.dact = act, dx.offset = offset;
          run_epilogue_case(cpu, gpu, rng, dx, "activation gradient");
        }
        for (bool accumulate : {false, true}) {
          test::EpilogueCase dw{out, in, rows};  // dW = dZ^T X, db = sum_rows dZ
          dw.trans_a = Transpose::Yes, dw.bias_grad = true, dw.bias_grad_accumulate = accumulate;
          dw.beta = accumulate ? 1.0f : 0.0f, dw.offset = offset;
          run_epilogue_case(cpu, gpu, rng, dw, "weight and bias gradient");
        }
      }
  for (Transpose ta : kBoth)
    for (Transpose tb : kBoth) {
      test::EpilogueCase c{37, 29, 65};
      c.trans_a = ta, c.trans_b = tb, c.bias = true, c.act = Activation::Relu, c.alpha = 0.75f;
      run_epilogue_case(cpu, gpu, rng, c, "relu, any transpose");
      c.act = Activation::Gelu, c.pre_activation = true, c.pad = 1;
      run_epilogue_case(cpu, gpu, rng, c, "gelu, any transpose");
      c = test::EpilogueCase{37, 29, 65};
      c.trans_a = ta, c.trans_b = tb, c.dact = Activation::Gelu, c.alpha = -1.5f;
      run_epilogue_case(cpu, gpu, rng, c, "dgelu, any transpose");
      c.dact = Activation::Relu, c.bias = true, c.pad = 2;
      run_epilogue_case(cpu, gpu, rng, c, "drelu with bias, any transpose");
      c.bias = false, c.pad = 0;
      c.dact = Activation::None, c.bias_grad = true, c.alpha = 1.0f;
      run_epilogue_case(cpu, gpu, rng, c, "bias gradient, any transpose");
    }
  test::EpilogueCase near_zero{64, 96, 1024};  // GELU's gradient where cdf + z pdf cancels, long sums
  near_zero.dact = Activation::Gelu, near_zero.z_near_gelu_prime_zero = true;
  run_epilogue_case(cpu, gpu, rng, near_zero, "dgelu near gelu'(z) = 0");
  test::EpilogueCase zero_k{7, 9, 0};  // C = epilogue(bias), db = 0 (+ old)
  zero_k.bias = true, zero_k.act = Activation::Gelu, zero_k.pre_activation = true, zero_k.pad = 1;  // lda >= 1
  run_epilogue_case(cpu, gpu, rng, zero_k, "k = 0");
  test::EpilogueCase empty_c{7, 0, 9};  // no C, but a bias gradient
  empty_c.trans_a = Transpose::Yes, empty_c.bias_grad = true, empty_c.bias_grad_accumulate = true, empty_c.pad = 1;
  run_epilogue_case(cpu, gpu, rng, empty_c, "n = 0");
}

TEST_F(CudaKernels, GemmEpiloguesMatchCpu) {
  SCOPED_TRACE(seed_text());
  run_all_epilogues(cpu, *gpu, rng);
}

TEST(CudaEpilogueHarness, PassesCpuAgainstCpuWithOtherSummationOrder) {
  // Runs without a GPU: the comparison above (windows, padding, tolerances,
  // k = 0 and n = 0) with a two-thread CpuBackend, whose split GEMM sums in
  // another order, in the GPU's place. A harness bug shows here, not first
  // on a GPU machine.
  SCOPED_TRACE(seed_text());
  CpuBackend one(1), two(2);
  std::mt19937_64 rng(test::test_seed());
  run_all_epilogues(one, two, rng);
}

TEST_F(CudaKernels, GemmEpiloguesOnSimpleFallbackKernel) {
  SCOPED_TRACE(seed_text());
  // The CUDA-core kernel implements the whole contract on its own, for
  // shapes cuBLASLt offers nothing for.
  gpu->force_simple_gemm_for_testing(true);
  run_all_epilogues(cpu, *gpu, rng);
  gpu->force_simple_gemm_for_testing(false);
}

// Every route's count must be the expected one (0 where not listed). A
// GEMM whose fused cuBLASLt route found no algorithm still gives correct
// results on the next route down (cuda_gemm.h), so only this shows it; the
// missing algorithm itself is named on stderr.
void expect_routes(const GemmRouteCounts& got, std::initializer_list<std::pair<GemmRoute, int64_t>> want,
                   const std::string& what) {
  GemmRouteCounts expected;
  for (const auto& w : want) expected.calls[static_cast<size_t>(w.first)] = w.second;
  for (int r = 0; r < kGemmRouteCount; ++r) {
    const auto route = static_cast<GemmRoute>(r);
    EXPECT_EQ(got[route], expected[route]) << what << ": GEMM calls on route \"" << gemm_route_name(route) << "\"";
  }
}

// FP16 values i/8 with |i| <= 8: products are multiples of 1/64 of
// magnitude <= 1, so a sum of k of them (plus such a bias) is a multiple of
// 1/64 below k + 1: exact in FP32, in any order, while 64 (k + 1) < 2^24.
std::vector<half16> random_eighths(std::mt19937_64& rng, size_t count) {
  std::vector<half16> out(count);
  for (auto& h : out) h = to_half(static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f);
  return out;
}

TEST_F(CudaKernels, GemmFusedReluMatchesCpuBitwiseWhereSumsAgree) {
  SCOPED_TRACE(seed_text());
  // Every sum is exact (random_eighths), so there is no summation order to
  // differ in: the GPU's fused relu(bias + sum) and its relu' must give the
  // CPU's bits (one RNE rounding of the same FP32 value on both). k = 64 with
  // packed 128-byte rows and cudaMalloc'd operands is a layout cuBLASLt has
  // algorithms for, and the route counts check the fused route really ran
  // (k = 1, lda = ldb = 1, could leave it to the simple kernel).
  for (bool grad : {false, true}) {
    test::EpilogueCase c{64, 96, 64};
    c.trans_b = Transpose::Yes;
    if (grad) c.dact = Activation::Relu; else c.bias = true, c.act = Activation::Relu;
    auto in = test::make_epilogue_inputs(rng, c);
    in.a = random_eighths(rng, in.a.size()), in.b = random_eighths(rng, in.b.size());
    in.bias = random_eighths(rng, in.bias.size());
    const auto before = gpu->gemm_route_counts_for_testing();
    const auto got = test::run_epilogue_case(*gpu, c, in).c;
    expect_routes(gpu->gemm_route_counts_for_testing().since(before),
                  {{grad ? GemmRoute::kLtThenReluGradientInPlace : GemmRoute::kLtReluBias, 1}},
                  grad ? "relu gradient" : "relu forward");
    expect_halves_equal(got, test::run_epilogue_case(cpu, c, in).c, grad ? "relu gradient" : "relu forward");
  }
}

TEST_F(CudaKernels, ModelGemmsTakeTheFusedCublasLtRoutes) {
  SCOPED_TRACE(seed_text());
  // MlpModel's own GEMMs, 784-1024-1024-10 with ReLU at batch 256, as the
  // trainer issues them (the flat parameter buffers, their views' offsets):
  // each must take the route cuda_gemm.h intends for it, not a fallback.
  const int rows = 256;
  const ParameterLayout layout = ParameterLayout::for_mlp({784, 1024, 1024, 10});
  ParameterStore params(*gpu, layout);
  params.set_master_weights(init_linear_parameters(layout, test::test_seed()));
  MlpModel model(*gpu, layout, Activation::Relu, rows);
  Buffer<half16> x(*gpu, static_cast<size_t>(rows) * model.input_width());
  x.upload(test::random_halves(rng, x.count()));

  auto routes = gpu->gemm_route_counts_for_testing();
  model.forward(x.data(), rows, params.weights_fp16.data());
  // Hidden layers: Z = X W^T + b with ReLU in one RELU_BIAS call; the
  // logits: BIAS. (W1 and W2 start 4 bytes past a 16-byte boundary, see
  // below; their unaligned biases go through the aligned staging copy.)
  auto now = gpu->gemm_route_counts_for_testing();
  expect_routes(now.since(routes), {{GemmRoute::kLtReluBias, 2}, {GemmRoute::kLtBias, 1}}, "forward");

  const auto dlogits = test::random_halves(rng, static_cast<size_t>(rows) * model.output_width());
  gpu->copy_to_device(model.output_grad(), dlogits.data(), dlogits.size() * sizeof(half16));
  // BGRADB needs a 16-byte-aligned bias-gradient vector. The flat gradient
  // buffer is cudaMalloc'd (256-byte aligned) and packs the layers last
  // first with no padding, so only biases at a multiple of 8 elements
  // qualify: for 784-1024-1024-10 that is the last layer's (at 10240); the
  // other two sit 4 bytes past a 16-byte boundary and take the plain GEMM
  // plus the bias-gradient kernel.
  int64_t bgradb_layers = 0;
  for (const LinearSlices& s : layout.layers) bgradb_layers += (s.bias_offset * sizeof(half16)) % 16 == 0;
  EXPECT_GE(bgradb_layers, 1) << "the layout gives BGRADB no layer: this test would not exercise it";
  const int64_t layers = static_cast<int64_t>(layout.layers.size());

  routes = gpu->gemm_route_counts_for_testing();
  model.backward(rows, params.weights_fp16.data(), params.grads_fp16.data(), /*accumulate=*/false);
  // dW with db by BGRADB in the same call where the vector is aligned; dX
  // (layers 2 and 3) as the plain GEMM, then relu' in place.
  now = gpu->gemm_route_counts_for_testing();
  expect_routes(now.since(routes),
                {{GemmRoute::kLtBgradb, bgradb_layers},
                 {GemmRoute::kLt, layers - bgradb_layers},
                 {GemmRoute::kBiasGradKernel, layers - bgradb_layers},
                 {GemmRoute::kLtThenReluGradientInPlace, 2}},
                "backward");

  routes = now;
  model.backward(rows, params.weights_fp16.data(), params.grads_fp16.data(), /*accumulate=*/true);
  // --grad-accum > 1: dW adds to the gradients (beta 1), which BGRADB cannot
  // (it writes the vector), so db comes from the bias-gradient kernel.
  now = gpu->gemm_route_counts_for_testing();
  expect_routes(now.since(routes),
                {{GemmRoute::kLt, 3}, {GemmRoute::kBiasGradKernel, 3}, {GemmRoute::kLtThenReluGradientInPlace, 2}},
                "accumulating backward");
  gpu->synchronize();
}

// ---- element-wise -----------------------------------------------------------------

TEST_F(CudaKernels, AddBias) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{37, 1001}, {1, 1}, {1025, 3}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    auto y = both(test::random_halves(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f));
    auto bias = both(test::random_halves(rng, cols));
    cpu.add_bias_fp16(y.cpu.data(), bias.cpu.data(), rows, cols);
    gpu->add_bias_fp16(y.gpu.data(), bias.gpu.data(), rows, cols);
    // One FP32 add of two FP16 values, one rounding: the same bits.
    expect_halves_equal(y.gpu.download(), y.cpu.download(), "y " + std::to_string(rows) + "x" + std::to_string(cols));
  }
}

TEST_F(CudaKernels, ActivationsForwardBackward) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const auto z_host = test::random_halves(rng, n, -6.0f, 6.0f);
  const auto dy_host = test::random_halves(rng, n, -2.0f, 2.0f);
  auto z = both(z_host);
  auto dy = both(dy_host);
  for (Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    const std::string name = act == Activation::None ? "none" : act == Activation::Relu ? "relu" : "gelu";
    auto y = both(test::poison_halves(n));
    cpu.activation_forward_fp16(act, z.cpu.data(), y.cpu.data(), n);
    gpu->activation_forward_fp16(act, z.gpu.data(), y.gpu.data(), n);
    auto dz = both(test::poison_halves(n));
    cpu.activation_backward_fp16(act, z.cpu.data(), dy.cpu.data(), dz.cpu.data(), n);
    gpu->activation_backward_fp16(act, z.gpu.data(), dy.gpu.data(), dz.gpu.data(), n);
    if (act == Activation::Gelu) {
      // erff/expf last bits; 1e-6 absolute covers 0.5 z (1 + erf(z/sqrt2))
      // cancelling for z down to -6.
      expect_close(y.gpu.download(), y.cpu.download(), kFp16RelTol, 1e-6, name + " forward");
      expect_close(dz.gpu.download(), dz.cpu.download(), kFp16RelTol, 1e-6, name + " backward");
    } else {
      expect_halves_equal(y.gpu.download(), y.cpu.download(), name + " forward");
      expect_halves_equal(dz.gpu.download(), dz.cpu.download(), name + " backward");
    }
    // In place (z == y, dz == dy), as the layers call them.
    auto inplace = both(z_host);
    cpu.activation_forward_fp16(act, inplace.cpu.data(), inplace.cpu.data(), n);
    gpu->activation_forward_fp16(act, inplace.gpu.data(), inplace.gpu.data(), n);
    expect_close(inplace.gpu.download(), inplace.cpu.download(), kFp16RelTol, 1e-6, name + " forward in place");
    auto grad_inplace = both(dy_host);
    cpu.activation_backward_fp16(act, z.cpu.data(), grad_inplace.cpu.data(), grad_inplace.cpu.data(), n);
    gpu->activation_backward_fp16(act, z.gpu.data(), grad_inplace.gpu.data(), grad_inplace.gpu.data(), n);
    expect_close(grad_inplace.gpu.download(), grad_inplace.cpu.download(), kFp16RelTol, 1e-6,
                 name + " backward in place");
  }
}

TEST_F(CudaKernels, BiasGradColumnSums) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{1031, 17}, {3, 1000}, {1, 1}, {4099, 33}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    auto dy = both(test::random_halves(rng, static_cast<size_t>(rows) * cols));
    const auto prev = test::random_halves(rng, cols);
    for (bool accumulate : {false, true}) {
      auto db = both(accumulate ? prev : test::poison_halves(cols));
      cpu.bias_grad_fp16(dy.cpu.data(), rows, cols, db.cpu.data(), accumulate);
      gpu->bias_grad_fp16(dy.gpu.data(), rows, cols, db.gpu.data(), accumulate);
      // FP32 column sums of rows terms in [-1, 1] in two orders: the floor
      // of test_cpu_kernels.cpp, 1e-5 * sum|terms| (<= rows).
      expect_close(db.gpu.download(), db.cpu.download(), kFp16RelTol, 1e-5 * rows + kFp16SubnormalStep,
                   "db " + std::to_string(rows) + "x" + std::to_string(cols) + (accumulate ? " accumulate" : ""));
    }
  }
}

TEST_F(CudaKernels, CastsIncludingSpecialValues) {
  SCOPED_TRACE(seed_text());
  auto f = test::random_floats(rng, 70001, -70000.0f, 70000.0f);
  const float inf = std::numeric_limits<float>::infinity();
  // Overflow, ties, subnormal and underflow edges, signed zero, Inf, NaN.
  for (float special : {0.0f, -0.0f, inf, -inf, std::nanf(""), 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                        std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.0f, -25) * 1.0001f,
                        std::ldexp(3.0f, -26), 1e-10f, 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11)})
    f.push_back(special);
  auto src = both(f);
  auto h = both(test::poison_halves(f.size()));
  cpu.cast_fp32_to_fp16(src.cpu.data(), h.cpu.data(), f.size());
  gpu->cast_fp32_to_fp16(src.gpu.data(), h.gpu.data(), f.size());
  expect_halves_equal(h.gpu.download(), h.cpu.download(), "fp32 -> fp16");

  // Every FP16 bit pattern widens exactly.
  std::vector<half16> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i].bits = static_cast<uint16_t>(i);
  auto halves = both(all);
  auto wide = both(nan_floats(all.size()));
  cpu.cast_fp16_to_fp32(halves.cpu.data(), wide.cpu.data(), all.size());
  gpu->cast_fp16_to_fp32(halves.gpu.data(), wide.gpu.data(), all.size());
  expect_floats_equal(wide.gpu.download(), wide.cpu.download(), "fp16 -> fp32");
}

// ---- losses -------------------------------------------------------------------------

TEST_F(CudaKernels, SoftmaxCrossEntropyForwardBackward) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{257, 10}, {64, 1000}, {1, 1}, {3, 33}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
    auto logits = test::random_halves(rng, static_cast<size_t>(rows) * cols, -4.0f, 4.0f);
    const auto labels = test::random_labels(rng, rows, cols);
    // Make about half the rows correct, and put exact ties in some rows:
    // the first maximum must win (torch.argmax), on both backends.
    for (int r = 0; r < rows; ++r) {
      half16* row = logits.data() + static_cast<size_t>(r) * cols;
      if (r % 2 == 0) row[labels[r]] = to_half(4.5f);
      if (r % 3 == 0 && cols > 1) {
        const int other = (labels[r] + 1) % cols;
        row[other] = to_half(5.0f);
        row[labels[r]] = to_half(5.0f);  // tie: correct only if label < other
      }
    }
    auto dl = both(logits);
    auto lab = both(labels);
    auto loss = both(nan_floats(1));
    auto correct = both(std::vector<int32_t>{-1});
    cpu.softmax_xent_forward(dl.cpu.data(), lab.cpu.data(), rows, cols, loss.cpu.data(), correct.cpu.data());
    gpu->softmax_xent_forward(dl.gpu.data(), lab.gpu.data(), rows, cols, loss.gpu.data(), correct.gpu.data());
    // Per-row sums over cols terms, then a mean over rows.
    expect_close(loss.gpu.download(), loss.cpu.download(), fp32_sum_rel_tol(static_cast<size_t>(rows) + cols), 1e-6,
                 "loss");
    EXPECT_EQ(correct.gpu.download(), correct.cpu.download());

    // Without a correct-count pointer.
    auto loss_only = both(nan_floats(1));
    gpu->softmax_xent_forward(dl.gpu.data(), lab.gpu.data(), rows, cols, loss_only.gpu.data(), nullptr);
    EXPECT_TRUE(same_float(loss_only.gpu.download()[0], loss.gpu.download()[0]));

    for (float scale : {1.0f, 1024.0f}) {
      auto grad = both(test::poison_halves(logits.size()));
      cpu.softmax_xent_backward(dl.cpu.data(), lab.cpu.data(), rows, cols, scale, grad.cpu.data());
      gpu->softmax_xent_backward(dl.gpu.data(), lab.gpu.data(), rows, cols, scale, grad.gpu.data());
      // expf last bits on p <= 1, times scale / rows.
      expect_close(grad.gpu.download(), grad.cpu.download(), kFp16RelTol,
                   4.0 * std::ldexp(1.0, -24) * scale / rows + kFp16SubnormalStep,
                   "dlogits scale " + std::to_string(scale));
    }
  }
}

TEST_F(CudaKernels, MeanSquaredErrorForwardBackward) {
  SCOPED_TRACE(seed_text());
  const std::pair<int, int> shapes[] = {{37, 101}, {1, 1}, {1000, 3}};
  for (const auto& shape : shapes) {
    const int rows = shape.first, cols = shape.second;
    const size_t n = static_cast<size_t>(rows) * cols;
    auto pred = both(test::random_halves(rng, n, -2.0f, 2.0f));
    auto target = both(test::random_floats(rng, n, -2.0f, 2.0f));
    auto loss = both(nan_floats(1));
    cpu.mse_forward(pred.cpu.data(), target.cpu.data(), rows, cols, loss.cpu.data());
    gpu->mse_forward(pred.gpu.data(), target.gpu.data(), rows, cols, loss.gpu.data());
    expect_close(loss.gpu.download(), loss.cpu.download(), fp32_sum_rel_tol(n), 0.0, "mse loss");
    auto grad = both(test::poison_halves(n));
    cpu.mse_backward(pred.cpu.data(), target.cpu.data(), rows, cols, 512.0f, grad.cpu.data());
    gpu->mse_backward(pred.gpu.data(), target.gpu.data(), rows, cols, 512.0f, grad.gpu.data());
    expect_close(grad.gpu.download(), grad.cpu.download(), kFp16RelTol, kFp16SubnormalStep, "dpred");
  }
}

// ---- optimizer ----------------------------------------------------------------------

TEST_F(CudaKernels, UnscaleFlagsInfAndNanAnywhere) {
  SCOPED_TRACE(seed_text());
  const size_t n = (size_t{1} << 20) + 7;
  const float inv_scale = 1.0f / 1024.0f;
  const auto clean = test::random_halves(rng, n, -1000.0f, 1000.0f);
  auto run = [&](const std::vector<half16>& grads, int32_t flag_before, const std::string& what) {
    auto g16 = both(grads);
    auto g32 = both(nan_floats(n));
    auto flag = both(std::vector<int32_t>{flag_before});
    cpu.unscale_fp16_to_fp32(g16.cpu.data(), g32.cpu.data(), n, inv_scale, flag.cpu.data());
    gpu->unscale_fp16_to_fp32(g16.gpu.data(), g32.gpu.data(), n, inv_scale, flag.gpu.data());
    // One exact widening and one FP32 multiply: the same bits.
    expect_floats_equal(g32.gpu.download(), g32.cpu.download(), what + ": grads_fp32");
    const int32_t flag_cpu = flag.cpu.download()[0];
    EXPECT_EQ(flag.gpu.download()[0], flag_cpu) << what;
    return flag_cpu;
  };
  EXPECT_EQ(run(clean, 0, "clean"), 0);
  EXPECT_EQ(run(clean, 1, "clean, flag already set (never cleared)"), 1);
  for (uint16_t bad : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e00}}) {  // +Inf, -Inf, NaN
    const size_t pos = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    auto poisoned = clean;
    poisoned[pos].bits = bad;
    EXPECT_EQ(run(poisoned, 0, "bits " + std::to_string(bad) + " at " + std::to_string(pos)), 1);
  }
  // The very last element too (grid-stride tail).
  auto last = clean;
  last[n - 1].bits = 0x7c00;
  EXPECT_EQ(run(last, 0, "Inf at the last element"), 1);
}

TEST_F(CudaKernels, L2Norm) {
  SCOPED_TRACE(seed_text());
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
    auto x = both(test::random_floats(rng, n, -3.0f, 3.0f));
    auto norm = both(nan_floats(1));
    cpu.l2_norm_fp32(x.cpu.data(), n, norm.cpu.data());
    gpu->l2_norm_fp32(x.gpu.data(), n, norm.gpu.data());
    // Both accumulate in double.
    expect_close(norm.gpu.download(), norm.cpu.download(), kFp32RelTol, 0.0, "norm n=" + std::to_string(n));
  }
  const size_t n = 4099;
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    auto host = test::random_floats(rng, n);
    host[std::uniform_int_distribution<size_t>(0, n - 1)(rng)] = bad;
    auto x = both(host);
    auto norm = both(std::vector<float>{0.0f});
    cpu.l2_norm_fp32(x.cpu.data(), n, norm.cpu.data());
    gpu->l2_norm_fp32(x.gpu.data(), n, norm.gpu.data());
    expect_floats_equal(norm.gpu.download(), norm.cpu.download(), "norm with a non-finite");
  }
}

TEST_F(CudaKernels, SgdVariants) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  struct Variant {
    const char* name;
    SgdParams params;
    bool momentum_buffer;
  };
  std::vector<Variant> variants;
  {
    SgdParams p;
    p.lr = 0.1f;
    variants.push_back({"plain, no momentum buffer", p, false});
    p.momentum = 0.9f, p.first_step = true;
    variants.push_back({"momentum first step", p, true});
    p.first_step = false;
    variants.push_back({"momentum", p, true});
    p.nesterov = true, p.weight_decay = 1e-4f;
    variants.push_back({"nesterov + weight decay", p, true});
    p.nesterov = false, p.momentum = 0.5f, p.dampening = 0.1f, p.weight_decay = 0.01f, p.grad_multiplier = 0.37f;
    variants.push_back({"dampening + weight decay + clip multiplier", p, true});
  }
  const auto grads_host = test::random_floats(rng, n);
  const auto master_host = test::random_floats(rng, n);
  const auto momentum_host = test::random_floats(rng, n);
  auto grads = both(grads_host);
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto master = both(master_host);
    auto momentum = both(momentum_host);
    auto weights = both(test::poison_halves(n));
    auto skip = both(std::vector<int32_t>{0});
    float* m_cpu = v.momentum_buffer ? momentum.cpu.data() : nullptr;
    float* m_gpu = v.momentum_buffer ? momentum.gpu.data() : nullptr;
    // Two steps on the same state; the second with first_step cleared.
    SgdParams params = v.params;
    for (int step = 0; step < 2; ++step) {
      cpu.sgd_update(params, grads.cpu.data(), master.cpu.data(), m_cpu, weights.cpu.data(), n, skip.cpu.data());
      gpu->sgd_update(params, grads.gpu.data(), master.gpu.data(), m_gpu, weights.gpu.data(), n,
                      step == 0 ? skip.gpu.data() : nullptr);
      params.first_step = false;
    }
    expect_close(master.gpu.download(), master.cpu.download(), kFp32RelTol, 1e-6, "master_fp32");
    expect_close(momentum.gpu.download(), momentum.cpu.download(), kFp32RelTol, 1e-6, "momentum_fp32");
    expect_close(weights.gpu.download(), weights.cpu.download(), kFp16RelTol, kFp16SubnormalStep, "weights_fp16");
  }
}

// The fused step (check pass over FP16 only, then SGD unscaling on the fly)
// gives the bits of the two-pass step (unscale to FP32, then SGD) on the
// device, and the check alone still flags an Inf.
TEST_F(CudaKernels, FusedSgdFromFp16GradsMatchesUnscaleThenSgdBitwise) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const float inv_scale = 1.0f / 4096.0f;
  std::vector<half16> grads_host = test::random_halves(rng, n, -60000.0f, 60000.0f);
  const auto master_host = test::random_floats(rng, n), momentum_host = test::random_floats(rng, n);
  SgdParams p;
  p.lr = 0.05f, p.momentum = 0.9f, p.first_step = false, p.weight_decay = 1e-4f, p.grad_multiplier = 0.75f;
  Buffer<half16> grads(*gpu, n), w_two(*gpu, n), w_fused(*gpu, n);
  Buffer<float> grads_fp32(*gpu, n), m_two(*gpu, n), m_fused(*gpu, n), mom_two(*gpu, n), mom_fused(*gpu, n);
  Buffer<int32_t> flag(*gpu, 1);
  grads.upload(grads_host);
  m_two.upload(master_host), m_fused.upload(master_host), mom_two.upload(momentum_host), mom_fused.upload(momentum_host);
  w_two.upload(test::poison_halves(n)), w_fused.upload(test::poison_halves(n));
  flag.zero();
  gpu->unscale_fp16_to_fp32(grads.data(), grads_fp32.data(), n, inv_scale, flag.data());
  gpu->sgd_update(p, grads_fp32.data(), m_two.data(), mom_two.data(), w_two.data(), n, flag.data());
  gpu->unscale_fp16_to_fp32(grads.data(), nullptr, n, inv_scale, flag.data());
  gpu->sgd_update_fp16_grads(p, grads.data(), inv_scale, m_fused.data(), mom_fused.data(), w_fused.data(), n,
                             flag.data());
  EXPECT_EQ(flag.download()[0], 0);
  EXPECT_EQ(m_fused.download(), m_two.download());
  EXPECT_EQ(mom_fused.download(), mom_two.download());
  const auto a = w_fused.download(), b = w_two.download();
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += a[i].bits != b[i].bits;
  EXPECT_EQ(differ, 0u);
  // One Inf at a random position: the check-only pass flags it.
  grads_host[rng() % n].bits = 0x7c00;
  grads.upload(grads_host);
  gpu->unscale_fp16_to_fp32(grads.data(), nullptr, n, inv_scale, flag.data());
  EXPECT_EQ(flag.download()[0], 1);
}

// The device-resident step state: prepare and finish on the GPU give the
// CPU backend's state field for field over a random run of overflows (the
// rule is the same header code; doubles and integers, so bitwise).
TEST_F(CudaKernels, StepStatePrepareAndFinishMatchTheCpu) {
  SCOPED_TRACE(seed_text());
  LossScaleRule rule;
  rule.growth_interval = 3, rule.hysteresis = 2, rule.min_scale = 2.0, rule.max_bad_steps = 3;
  StepStatus host{};
  host.scale = 65536.0, host.hysteresis_left = rule.hysteresis;
  Buffer<StepStatus> dev(*gpu, 1);
  gpu->copy_to_device(dev.data(), &host, sizeof host);
  for (int i = 0; i < 300; ++i) {
    const bool overflow = rng() % 3 == 0;
    const double backward_divisor = 1 + static_cast<double>(rng() % 4), unscale_divisor = 0.5 * (1 + rng() % 8);
    const float lr = 0.001f * static_cast<float>(1 + rng() % 100);
    cpu.step_status_prepare(&host, backward_divisor, unscale_divisor, lr);
    gpu->step_status_prepare(dev.data(), backward_divisor, unscale_divisor, lr);
    if (overflow) {
      host.nonfinite = 1;
      const int32_t one = 1;
      gpu->copy_to_device(&dev.data()->nonfinite, &one, sizeof one);
    }
    cpu.step_status_finish(rule, &host);
    gpu->step_status_finish(rule, dev.data());
    StepStatus got{};
    gpu->copy_to_host(&got, dev.data(), sizeof got);
    ASSERT_EQ(std::memcmp(&got, &host, sizeof got), 0) << "step " << i << ": scale " << got.scale << " vs "
                                                       << host.scale;
  }
}

// A captured step (CUDA graph) reads its scalars from the step state when
// it is replayed: unscale + fused SGD captured once, replayed after the
// state changed (scale, lr, momentum start), equals the eager CPU step on
// the new values; a set flag skips the replayed update.
TEST_F(CudaKernels, CapturedStepReadsTheStepStateOnEveryReplay) {
  SCOPED_TRACE(seed_text());
  const size_t n = 50021;
  const auto grads_host = test::random_halves(rng, n, -2000.0f, 2000.0f);
  const auto master_host = test::random_floats(rng, n), momentum_host = test::random_floats(rng, n);
  Pair<half16> grads = both(grads_host), weights = both(test::poison_halves(n));
  Pair<float> master = both(master_host), momentum = both(momentum_host);
  Buffer<StepStatus> dev(*gpu, 1);
  StepStatus host{};
  host.scale = 1024.0;
  gpu->copy_to_device(dev.data(), &host, sizeof host);
  auto queue_step = [&](Backend& be, StepStatus* st, Buffer<half16>& g, Buffer<float>& m, Buffer<float>& mom,
                        Buffer<half16>& w) {
    SgdParams p;
    p.momentum = 0.9f, p.weight_decay = 1e-4f;
    p.lr_ptr = &st->lr, p.momentum_initialized = &st->momentum_initialized;
    be.unscale_fp16_to_fp32(g.data(), nullptr, n, ScalarArg::at(&st->inv_scale), &st->nonfinite);
    be.sgd_update_fp16_grads(p, g.data(), ScalarArg::at(&st->inv_scale), m.data(), mom.data(), w.data(), n,
                             &st->nonfinite);
    be.step_status_finish(LossScaleRule{}, st);
  };
  gpu->begin_capture();
  queue_step(*gpu, dev.data(), grads.gpu, master.gpu, momentum.gpu, weights.gpu);
  const int graph = gpu->end_capture();
  for (int replay = 0; replay < 4; ++replay) {
    const double divisor = 1.0 + replay;
    const float lr = 0.01f * static_cast<float>(replay + 1);
    cpu.step_status_prepare(&host, 1.0, divisor, lr);
    gpu->step_status_prepare(dev.data(), 1.0, divisor, lr);
    queue_step(cpu, &host, grads.cpu, master.cpu, momentum.cpu, weights.cpu);
    gpu->replay(graph);
    expect_close(master.gpu.download(), master.cpu.download(), kFp32RelTol, 1e-6, "master after replay");
    expect_close(momentum.gpu.download(), momentum.cpu.download(), kFp32RelTol, 1e-6, "momentum after replay");
    StepStatus got{};
    gpu->copy_to_host(&got, dev.data(), sizeof got);
    EXPECT_EQ(got.scale, host.scale);
    EXPECT_EQ(got.momentum_initialized, 1);
  }
  // An Inf gradient: the replayed check flags it and the update is skipped.
  auto bad = grads_host;
  bad[rng() % n].bits = 0x7c00;
  grads.gpu.upload(bad);
  const auto before = master.gpu.download();
  gpu->step_status_prepare(dev.data(), 1.0, 1.0, 0.5f);
  gpu->replay(graph);
  EXPECT_EQ(master.gpu.download(), before);
  StepStatus got{};
  gpu->copy_to_host(&got, dev.data(), sizeof got);
  EXPECT_EQ(got.last_skipped, 1);
  EXPECT_EQ(got.skipped_total, 1);
  // Host waits inside a capture are refused, and the stream stays usable.
  gpu->begin_capture();
  EXPECT_THROW(gpu->synchronize(), Error);
  gpu->end_capture();
  gpu->synchronize();
}

// The message of the ddp::Error `call` throws; "" when it throws none.
template <class F>
std::string error_of(F&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(CudaKernels, BufferGrowthAroundACaptureIsRefused) {
  SCOPED_TRACE(seed_text());
  // A captured graph keeps raw pointers, so the buffers grown on demand
  // (graph_safe_growth.h) must refuse to grow inside a capture and, once a
  // graph exists, rather than free a block it uses. GELU forward with a
  // pre-activation output takes the FP32 scratch route; a bias view at an
  // odd offset is staged.
  test::EpilogueCase small{8, 16, 32}, large{64, 256, 32};
  for (auto* c : {&small, &large}) c->trans_b = Transpose::Yes, c->bias = true, c->act = Activation::Gelu;
  for (auto* c : {&small, &large}) c->pre_activation = true;
  test::EpilogueCase small_bias = small, large_bias = large;  // plain GEMM + BIAS from the staging copy
  for (auto* c : {&small_bias, &large_bias}) c->act = Activation::None, c->pre_activation = false, c->offset = 1;
  // Eager runs of the small shapes allocate the scratch and the staging.
  test::run_epilogue_case(*gpu, small, test::make_epilogue_inputs(rng, small));
  test::run_epilogue_case(*gpu, small_bias, test::make_epilogue_inputs(rng, small_bias));
  // (The staging is made whether or not cuBLASLt then has an algorithm.)
  ASSERT_EQ(gpu->gemm_route_counts_for_testing()[GemmRoute::kLtFp32ThenEpilogue], 1)
      << "GELU did not take the FP32 scratch route: the scratch checks below would check nothing";

  // Every buffer a GEMM below touches exists before the capture.
  struct Operands {
    Buffer<half16> a, b, bias, z, out, pre, db;
    GemmFp16 g;
  };
  auto operands = [&](const test::EpilogueCase& c) {
    const auto in = test::make_epilogue_inputs(rng, c);
    Operands o{Buffer<half16>(*gpu, in.a.size()),         Buffer<half16>(*gpu, in.b.size()),
               Buffer<half16>(*gpu, in.bias.size()),      Buffer<half16>(*gpu, in.dact_input.size()),
               Buffer<half16>(*gpu, in.c0.size()),        Buffer<half16>(*gpu, c.c_count()),
               Buffer<half16>(*gpu, in.bias_grad0.size()), GemmFp16{}};
    o.a.upload(in.a), o.b.upload(in.b), o.bias.upload(in.bias);
    o.g = test::epilogue_gemm(c, o.a.data(), o.b.data(), o.bias.data(), o.z.data(), o.out.data(), o.pre.data(),
                              o.db.data());
    return o;
  };
  Operands small_ops = operands(small), large_ops = operands(large), large_bias_ops = operands(large_bias);
  const int rows = 100000;  // cross-entropy scratch beyond the initial 64 KiB
  Buffer<half16> logits(*gpu, static_cast<size_t>(rows) * 2);
  Buffer<int32_t> labels(*gpu, rows);
  Buffer<float> loss(*gpu, 1);
  gpu->fill_zero(logits.data(), logits.count() * sizeof(half16));
  gpu->fill_zero(labels.data(), labels.count() * sizeof(int32_t));

  // Inside the capture (the reduction scratch: its check comes before any
  // CUDA call, so the capture stays valid; the GEMM's large shape would
  // first query cuBLASLt's heuristic inside the capture).
  gpu->begin_capture();
  std::string what =
      error_of([&] { gpu->softmax_xent_forward(logits.data(), labels.data(), rows, 2, loss.data(), nullptr); });
  EXPECT_NE(what.find("CudaBackend reduction scratch would grow from 65536 to 800000 bytes inside a CUDA graph capture"),
            std::string::npos)
      << what;
  gpu->gemm_fp16(small_ops.g);  // fits: captured as usual
  const int graph = gpu->end_capture();
  gpu->replay(graph);
  gpu->synchronize();

  what = error_of([&] { gpu->gemm_fp16(large_ops.g); });
  EXPECT_NE(what.find("GEMM FP32 accumulator scratch would grow from 512 to 65536 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  what = error_of([&] { gpu->gemm_fp16(large_bias_ops.g); });
  EXPECT_NE(what.find("GEMM bias staging would grow from 32 to 512 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  what = error_of([&] { gpu->softmax_xent_forward(logits.data(), labels.data(), rows, 2, loss.data(), nullptr); });
  EXPECT_NE(what.find("CudaBackend reduction scratch would grow from 65536 to 800000 bytes after a CUDA graph capture"),
            std::string::npos)
      << what;
  // Nothing was freed: the graph still replays, and small GEMMs still run.
  gpu->replay(graph);
  gpu->gemm_fp16(small_ops.g);
  gpu->synchronize();
}

TEST_F(CudaKernels, SgdSkippedWhenFlagSetChangesNothing) {
  SCOPED_TRACE(seed_text());
  const size_t n = 100003;
  const auto master_host = test::random_floats(rng, n);
  const auto momentum_host = test::random_floats(rng, n);
  const auto weights_host = test::random_halves(rng, n);
  Buffer<float> grads(*gpu, n), master(*gpu, n), momentum(*gpu, n);
  Buffer<half16> weights(*gpu, n);
  Buffer<int32_t> skip(*gpu, 1);
  grads.upload(test::random_floats(rng, n));
  master.upload(master_host), momentum.upload(momentum_host), weights.upload(weights_host);
  skip.upload(std::vector<int32_t>{1});
  SgdParams p;
  p.lr = 0.1f, p.momentum = 0.9f, p.first_step = false, p.weight_decay = 0.01f, p.nesterov = true;
  gpu->sgd_update(p, grads.data(), master.data(), momentum.data(), weights.data(), n, skip.data());
  // Bitwise: not one element may move.
  EXPECT_EQ(master.download(), master_host);
  EXPECT_EQ(momentum.download(), momentum_host);
  const auto w = weights.download();
  size_t changed = 0;
  for (size_t i = 0; i < n; ++i) changed += w[i].bits != weights_host[i].bits;
  EXPECT_EQ(changed, 0u);
}

// ---- no GPU needed ------------------------------------------------------------------

TEST(CudaCheckMacros, ThrowWithFileLineCallAndLibraryText) {
  try {
    DDP_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "DDP_CUDA_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda_test_kernels.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << what;
  }
  try {
    DDP_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "DDP_CUBLAS_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda_test_kernels.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << what;
    EXPECT_NE(what.find(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)), std::string::npos) << what;
  }
  EXPECT_NO_THROW(DDP_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(DDP_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(DDP_CUDA_CHECK_NOTHROW(cudaErrorInvalidValue));  // prints to stderr only
}

TEST(CudaDeviceQuery, NeverThrowsAndExplainsNone) {
  std::string why = "unchanged";
  int count = -1;
  EXPECT_NO_THROW(count = visible_cuda_devices(&why));
  EXPECT_GE(count, 0);
  if (count == 0) {
    EXPECT_FALSE(why.empty());
    EXPECT_NE(why, "unchanged");
  }
  EXPECT_EQ(visible_cuda_devices(nullptr), count);
  // With a GPU, the query leaves no error for the next CUDA call to find.
  // (Without a driver every runtime call keeps failing with the same
  // initialisation error, so there is nothing to clear.)
  if (count > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

}  // namespace
}  // namespace ddp
